#!/usr/bin/env bash
# Session 7, call 1: build; where the kron backward's time goes (kron_bwd_where.py: eager, device,
# host and kernel times per case); the kron bench with device times for forward AND backward rows
# (backward captured on its forward's stream); the issue-3 target bench with stk installed from the
# carried .whl/ (the stk rows' late-bound verify fixed). Steps capped; summary lines last.
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
diag_env
python3 -m pip install --no-deps --no-index -q $R/.whl/stanford_stk-*.whl > /tmp/stk_install.txt 2>&1 || tail -3 /tmp/stk_install.txt
cd /tmp
T0=$SECONDS
cap() { local c=$(( $1 - (SECONDS - T0) )); [ $c -lt 5 ] && c=5; echo $c; }
timeout $(cap 100) python3 $R/tools/diag/kron_bwd_where.py $OUT/kron_bwd_where.json > $OUT/kron_bwd_where.txt 2>&1
echo "kron_bwd_where exit $?"
timeout $(cap 190) python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json > $OUT/kron_bench.txt 2>&1
echo "kron bench exit $?"
SPARSEKERN_BENCH_BSR=targets timeout $(cap 420) python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > /tmp/bsr_bench.txt 2> $OUT/bsr_bench_rows.txt
echo "bsr bench exit $?"
python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1
grep -E "ERROR" $OUT/bsr_bench_rows.txt | cut -c1-200 | head -4
grep -E "device_ms_error" $OUT/kron.json | head -2
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/kron.json"))
for r in d["rows"]:
    print(f"{r['op'][12:]:4s} {r['shape']:18s} eager {1e3*r['ours']:7.1f} v2 {1e3*r['anchor_time']:7.1f} | device {1e3*r.get('device_ms_ours', float('nan')):7.1f} v2 {1e3*r.get('device_ms_anchor', float('nan')):7.1f}")
PY
grep -E "8192x4096.*(bf16|fp16) +128|8192x3072|8192x768" $OUT/bsr_summary.txt | cut -c1-130
tail -1 $OUT/bsr_summary.txt
grep -E "b/f eager" $OUT/kron_bwd_where.txt | cut -c1-200
echo "total $((SECONDS - T0))s after build"
