#!/usr/bin/env bash
# Session 8, second call: s8_run1's tests and timings after the cp.async factor copies (forward and
# backward) and the two-blocks-per-SM backward plans, then the kron bench (JSON with device times).
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_cuda_tests 40
timeout $(cap 180) python3 $R/tools/diag/kron_bwd_fast.py $OUT/kron_bwd_fast.json > $OUT/kron_bwd_fast.txt 2>&1
grep -v "kernels:\|Warn\|warn" $OUT/kron_bwd_fast.txt | cut -c1-250
timeout $(cap 250) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py > $OUT/memcheck.txt 2>&1
echo "memcheck exit $?: $(grep -E "ERROR SUMMARY" $OUT/memcheck.txt | tail -1); $(grep -c ' ok$' $OUT/memcheck.txt) ok, $(grep -c WRONG $OUT/memcheck.txt) wrong"
diag_kron_bench 470
echo "total $((SECONDS - T0))s after build"
