#!/usr/bin/env bash
# Session 10, final call at the committed state: every kron CUDA test, memcheck and racecheck of the
# small-factor forward, kernel times of the small cases, the kron bench.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_cuda_tests 150
timeout $(cap 200) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_small_check.py > $OUT/memcheck_small.txt 2>&1
echo "memcheck exit $?: $(grep -E "ERROR SUMMARY" $OUT/memcheck_small.txt | tail -1); $(grep -c ' ok$' $OUT/memcheck_small.txt) ok, $(grep -c WRONG $OUT/memcheck_small.txt) wrong"
timeout $(cap 250) compute-sanitizer --tool racecheck --error-exitcode 3 python3 $R/tools/diag/kron_small_check.py > $OUT/racecheck_small.txt 2>&1
echo "racecheck exit $?: $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/racecheck_small.txt | tail -1); $(grep -c ' ok$' $OUT/racecheck_small.txt) ok"
for c in "1024 8,8,8,8 auto" "1024 8,8,8,8 old" "1024 16,16,16 auto" "1024 16,16,16 old" "4096 8,8,8,8 auto" "4096 16,16,16 auto"; do
  set -- $c
  timeout $(cap 280) python3 $R/tools/diag/kron_fwd_one.py $1 $2 $3 --time
done
diag_kron_bench 420
echo "total $((SECONDS - T0))s after build"
