#!/usr/bin/env bash
# Session 7, call 3: build; kron + dense CUDA tests (tiled transpose in the step-wise backward;
# intermediate states for the backward); memcheck of the saved-states, step-wise and transpose
# tests; kron_bwd_where.py (eager / device / host times per case, kept vs recomputed states, fused
# vs step-wise backward, the transpose against torch's); the kron bench (device times for forward
# and backward rows). Steps capped; summary lines last.
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
T0=$SECONDS
cap() { local c=$(( $1 - (SECONDS - T0) )); [ $c -lt 5 ] && c=5; echo $c; }
T=$R/tests/python
timeout $(cap 110) python3 -m pytest $T/test_kron.py $T/test_dense.py -q -p no:cacheprovider -m cuda > $OUT/kron_tests.txt 2>&1
echo "exit $?" >> $OUT/kron_tests.txt
timeout $(cap 170) compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest $T/test_kron.py -q -p no:cacheprovider -m cuda -k "saved or steps or transpose" $T/test_dense.py > $OUT/saved_memcheck.txt 2>&1
echo "exit $?" >> $OUT/saved_memcheck.txt
timeout $(cap 300) python3 $R/tools/diag/kron_bwd_where.py $OUT/kron_bwd_where.json > $OUT/kron_bwd_where.txt 2>&1
echo "kron_bwd_where exit $?"
timeout $(cap 400) python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json > $OUT/kron_bench.txt 2>&1
echo "kron bench exit $?"
grep -E "device_ms_error" $OUT/kron.json | cut -c1-200 | head -2
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/kron.json"))
for r in d["rows"]:
    print(f"{r['op'][12:]:4s} {r['shape']:18s} eager {1e3*r['ours']:7.1f} v2 {1e3*r['anchor_time']:7.1f} | device {1e3*r.get('device_ms_ours', float('nan')):7.1f} v2 {1e3*r.get('device_ms_anchor', float('nan')):7.1f}")
PY
grep -E "b/f eager|^transpose" $OUT/kron_bwd_where.txt | cut -c1-330
for f in kron_tests saved_memcheck; do echo "$f: $(grep -E "passed|failed|ERROR SUMMARY" $OUT/$f.txt | tail -2 | tr '\n' ' ') $(tail -1 $OUT/$f.txt)"; done
grep -E "^FAILED" $OUT/kron_tests.txt | head -5
echo "total $((SECONDS - T0))s after build"
