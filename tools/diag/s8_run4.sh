#!/usr/bin/env bash
# Session 8, fourth call: after the swizzled GN (G1 write-back bank conflicts): kron CUDA tests, backward
# timings, memcheck, racecheck, then the kron bench (JSON with device times).
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
diag_env
cd /tmp
T0=$SECONDS
cap() { local c=$(( $1 - (SECONDS - T0) )); [ $c -lt 5 ] && c=5; echo $c; }
T=$R/tests/python
timeout $(cap 40) python3 -m pytest $T/test_kron.py -q -p no:cacheprovider -m cuda > $OUT/kron_tests.txt 2>&1
echo "kron cuda tests: $(tail -1 $OUT/kron_tests.txt)"
grep -E "^FAILED" $OUT/kron_tests.txt | head -5
timeout $(cap 200) python3 $R/tools/diag/kron_bwd_fast.py $OUT/kron_bwd_fast.json > $OUT/kron_bwd_fast.txt 2>&1
grep -v "kernels:\|Warn\|warn" $OUT/kron_bwd_fast.txt | cut -c1-330
timeout $(cap 320) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py > $OUT/memcheck.txt 2>&1
echo "memcheck exit $?: $(grep -E "ERROR SUMMARY" $OUT/memcheck.txt | tail -1); $(grep -c ' ok$' $OUT/memcheck.txt) ok, $(grep -c WRONG $OUT/memcheck.txt) wrong"
timeout $(cap 420) compute-sanitizer --tool racecheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py small > $OUT/racecheck.txt 2>&1
echo "racecheck exit $?: $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/racecheck.txt | tail -1); $(grep -c ' ok$' $OUT/racecheck.txt) ok"
timeout $(cap 560) python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json > $OUT/kron_bench.txt 2>&1
echo "kron bench exit $?"
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/kron.json"))
for r in d["rows"]:
    print(f"{r['op'][12:]:4s} {r['shape']:18s} eager {1e3*r['ours']:7.1f} v2 {1e3*r['anchor_time']:7.1f} | device {1e3*r.get('device_ms_ours', float('nan')):7.1f} v2 {1e3*r.get('device_ms_anchor', float('nan')):7.1f} | roof {1e3*r.get('roofline_ms', float('nan')):6.1f}")
PY
echo "total $((SECONDS - T0))s after build"
