#!/usr/bin/env bash
# Session 8, third call: after G1 over the stage's DN/DT (two blocks per SM for the kept-T0
# backward) and the rows-per-tile rule: kron CUDA tests, backward timings, memcheck, racecheck.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_cuda_tests 40
timeout $(cap 200) python3 $R/tools/diag/kron_bwd_fast.py $OUT/kron_bwd_fast.json > $OUT/kron_bwd_fast.txt 2>&1
grep -v "kernels:\|Warn\|warn" $OUT/kron_bwd_fast.txt | cut -c1-330
timeout $(cap 320) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py > $OUT/memcheck.txt 2>&1
echo "memcheck exit $?: $(grep -E "ERROR SUMMARY" $OUT/memcheck.txt | tail -1); $(grep -c ' ok$' $OUT/memcheck.txt) ok, $(grep -c WRONG $OUT/memcheck.txt) wrong"
timeout $(cap 420) compute-sanitizer --tool racecheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py small > $OUT/racecheck.txt 2>&1
echo "racecheck exit $?: $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/racecheck.txt | tail -1); $(grep -c ' ok$' $OUT/racecheck.txt) ok"
echo "total $((SECONDS - T0))s after build"
