#!/usr/bin/env bash
# Session 7, final call (H200): build; kron + dense + bsr CUDA tests; the kron bench (JSON, device
# times for forward and backward rows); the issue-3 target bench with stk installed from the
# carried .whl/ (JSON + summary). Steps capped so the call ends within ~560 s; summary lines last.
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
diag_env
python3 -m pip install --no-deps --no-index -q $R/.whl/stanford_stk-*.whl > /tmp/stk_install.txt 2>&1 || tail -3 /tmp/stk_install.txt
cd /tmp
T0=$SECONDS
cap() { local c=$(( $1 - (SECONDS - T0) )); [ $c -lt 5 ] && c=5; echo $c; }
T=$R/tests/python
timeout $(cap 100) python3 -m pytest $T/test_kron.py $T/test_dense.py $T/test_bsr.py -q -p no:cacheprovider -m cuda > $OUT/cuda_tests.txt 2>&1
echo "exit $?" >> $OUT/cuda_tests.txt
timeout $(cap 190) python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json > $OUT/kron_bench.txt 2>&1
echo "kron bench exit $?"
SPARSEKERN_BENCH_BSR=targets timeout $(cap 420) python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > /tmp/bsr_bench.txt 2> $OUT/bsr_bench_rows.txt
echo "bsr bench exit $?"
python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1
grep -E "ERROR" $OUT/bsr_bench_rows.txt | cut -c1-200 | head -4
grep -E "device_ms_error" $OUT/kron.json | cut -c1-200 | head -2
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/kron.json"))
for r in d["rows"]:
    print(f"{r['op'][12:]:4s} {r['shape']:18s} eager {1e3*r['ours']:7.1f} v2 {1e3*r['anchor_time']:7.1f} | device {1e3*r.get('device_ms_ours', float('nan')):7.1f} v2 {1e3*r.get('device_ms_anchor', float('nan')):7.1f} | roof {1e3*r.get('roofline_ms', float('nan')):6.1f}")
PY
grep -E "8192x4096" $OUT/bsr_summary.txt | cut -c1-130
tail -1 $OUT/bsr_summary.txt
echo "cuda_tests: $(grep -E "passed|failed" $OUT/cuda_tests.txt | tail -1) $(tail -1 $OUT/cuda_tests.txt)"
grep -E "^FAILED" $OUT/cuda_tests.txt | head -5
echo "total $((SECONDS - T0))s after build"
