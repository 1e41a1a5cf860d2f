#!/usr/bin/env bash
# Session 8, fourth call: after the swizzled GN (G1 write-back bank conflicts): kron CUDA tests, backward
# timings, memcheck, racecheck, then the kron bench (JSON with device times).
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_cuda_tests 40
timeout $(cap 200) python3 $R/tools/diag/kron_bwd_fast.py $OUT/kron_bwd_fast.json > $OUT/kron_bwd_fast.txt 2>&1
grep -v "kernels:\|Warn\|warn" $OUT/kron_bwd_fast.txt | cut -c1-330
timeout $(cap 320) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py > $OUT/memcheck.txt 2>&1
echo "memcheck exit $?: $(grep -E "ERROR SUMMARY" $OUT/memcheck.txt | tail -1); $(grep -c ' ok$' $OUT/memcheck.txt) ok, $(grep -c WRONG $OUT/memcheck.txt) wrong"
timeout $(cap 420) compute-sanitizer --tool racecheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py small > $OUT/racecheck.txt 2>&1
echo "racecheck exit $?: $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/racecheck.txt | tail -1); $(grep -c ' ok$' $OUT/racecheck.txt) ok"
diag_kron_bench 560
echo "total $((SECONDS - T0))s after build"
