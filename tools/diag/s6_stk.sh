#!/usr/bin/env bash
# Session 6: the issue-3 target bench with stk installed (stanford-stk 0.7.1 from the carried
# .whl/, --no-deps: Triton comes with torch there), so that its rows (blocks of 128, fp16/bf16)
# run beside ours in the same process; the rows' errors, if any, are printed. Build first.
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
python3 -m pip install --no-deps --no-index -q $R/.whl/stanford_stk-*.whl > $OUT/stk_install.txt 2>&1
python3 -c "import stk, triton; print('stk', getattr(stk, '__version__', '?'), 'triton', triton.__version__)" 2>&1 | tail -2
cd /tmp
SPARSEKERN_BENCH_BSR=targets timeout 300 python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > /tmp/bsr_bench.txt 2> $OUT/bsr_bench.err
echo "bsr bench exit $?"
python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/bsr.json"))
for r in d["rows"]:
    if "stk" in r.get("anchor", ""):
        print(r["shape"], r["dtype"], r.get("density"), "ratio", round(r.get("ratio", float("nan")), 3), r.get("error", "")[:200])
PY
grep -E "8192x4096.*(bf16|fp16) +128" $OUT/bsr_summary.txt | cut -c1-130
tail -1 $OUT/bsr_summary.txt
