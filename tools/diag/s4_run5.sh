#!/usr/bin/env bash
# Session 4, fifth device run: build (three CUTLASS 2:4 tile configurations); every CUDA test;
# memcheck of the CUTLASS tests; the 2:4 choice at the target shape; semi bench; kron bench with the
# default backward choice and with SPARSEKERN_KRON_BWD=fused, same process order, for comparison.
source "$(dirname "$0")/lib.sh"
diag_build $OUT/build_step.log
cd /tmp
{
echo "=== pytest -m cuda (all families) $(date +%T)"
timeout 240 python3 -X faulthandler -m pytest $R/tests/python -q -p no:cacheprovider -m cuda --junitxml=$OUT/junit-cuda.xml 2>&1 | tail -4
echo "=== memcheck: cutlass 2:4 $(date +%T)"
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_semi.py -q -p no:cacheprovider -m cuda \
   -k "cutlass" > $OUT/memcheck.log 2>&1
grep -E "ERROR SUMMARY|passed|failed|FAILED" $OUT/memcheck.log | tail -4
echo "=== 2:4 choice at 8192x4096->4096 $(date +%T)"
timeout 120 python3 $R/tools/diag/semi_report.py 2>&1 | tail -30
echo "=== bench semi $(date +%T)"
timeout 120 python3 -m sparsekern.cli bench --full --family semi --json $OUT/semi.json 2>&1 | grep -E "^semi" | cut -c1-150
for mode in default fused; do
  echo "=== bench kron, backward $mode $(date +%T)"
  e=; [ $mode = fused ] && e=fused
  SPARSEKERN_KRON_BWD=$e timeout 150 python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron-$mode.json 2>&1 | grep -E "^kron" | cut -c1-110
done
echo "=== end $(date +%T)"
} > $OUT/run5.log 2>&1
cat $OUT/run5.log
