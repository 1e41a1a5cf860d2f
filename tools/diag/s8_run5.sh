#!/usr/bin/env bash
# Session 8, fifth call: after cp.async copies in the generic fused kernels (kron_tile.h, fp32/fp64):
# kron CUDA tests, memcheck of generic and register-tile checks, forward old/new A/B, kron bench.
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
timeout $(cap 130) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_generic_check.py > $OUT/memcheck.txt 2>&1
echo "memcheck generic exit $?: $(grep -E "ERROR SUMMARY" $OUT/memcheck.txt | tail -1); $(grep -c ' ok$' $OUT/memcheck.txt) ok, $(grep -c WRONG $OUT/memcheck.txt) wrong"
timeout $(cap 200) compute-sanitizer --tool racecheck --error-exitcode 3 python3 $R/tools/diag/kron_generic_check.py > $OUT/racecheck.txt 2>&1
echo "racecheck generic exit $?: $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/racecheck.txt | tail -1); $(grep -c ' ok$' $OUT/racecheck.txt) ok"
timeout $(cap 300) python3 $R/tools/diag/kron_fwd_ab.py --quick > $OUT/kron_fwd_ab.txt 2>&1
grep -v "^ *$" $OUT/kron_fwd_ab.txt | cut -c1-200 | head -24
timeout $(cap 540) python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json > $OUT/kron_bench.txt 2>&1
echo "kron bench exit $?"
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/kron.json"))
for r in d["rows"]:
    print(f"{r['op'][12:]:4s} {r['shape']:18s} eager {1e3*r['ours']:7.1f} v2 {1e3*r['anchor_time']:7.1f} | device {1e3*r.get('device_ms_ours', float('nan')):7.1f} v2 {1e3*r.get('device_ms_anchor', float('nan')):7.1f} | roof {1e3*r.get('roofline_ms', float('nan')):6.1f}")
PY
echo "total $((SECONDS - T0))s after build"
