#!/usr/bin/env bash
# Session 4, fourth device run: build (with the CUTLASS sm90 2:4 kernels); every CUDA test; memcheck
# of the CUTLASS 2:4 tests and the kron steps backward; the 2:4 choice at the target shape; the
# semi, kron and in-place benches (JSON).
source "$(dirname "$0")/lib.sh"
STAGES="build" bash tools/device_check.sh > $OUT/build_step.log 2>&1 || { tail -40 $OUT/build_step.log; exit 1; }
grep -E "build ok|2:4" $OUT/build_step.log $OUT/build.log | head -4
grep -c "SparseGemm\|sm90_sparse\|GemmUniversal" $OUT/sass.txt
cd /tmp
{
echo "=== pytest -m cuda (all families) $(date +%T)"
timeout 240 python3 -X faulthandler -m pytest $R/tests/python -q -p no:cacheprovider -m cuda -x --junitxml=$OUT/junit-cuda.xml 2>&1 | tail -15
echo "=== memcheck: cutlass 2:4, kron default choice $(date +%T)"
timeout 120 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_semi.py $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda \
   -k "cutlass or default_choice" > $OUT/memcheck.log 2>&1
grep -E "ERROR SUMMARY|passed|failed|FAILED" $OUT/memcheck.log | tail -6
echo "=== 2:4 choice at 8192x4096->4096 $(date +%T)"
timeout 120 python3 $R/tools/diag/semi_report.py 2>&1 | tail -30
echo "=== bench semi $(date +%T)"
timeout 120 python3 -m sparsekern.cli bench --full --family semi --json $OUT/semi.json 2>&1 | grep -E "^semi|family" | head
echo "=== bench kron $(date +%T)"
timeout 150 python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json 2>&1 | grep -E "^kron|family" | head -24
echo "=== bench inplace $(date +%T)"
timeout 150 python3 -m sparsekern.cli bench --full --family inplace --json $OUT/inplace.json 2>&1 | grep -E "^inplace|family" | head -30
echo "=== end $(date +%T)"
} > $OUT/run4.log 2>&1
cat $OUT/run4.log | cut -c1-230
