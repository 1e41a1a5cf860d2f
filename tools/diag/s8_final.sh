#!/usr/bin/env bash
# Session 8, final call: the committed state after the clean-up (fast_mma over fast_mma_acc, shared
# device Exec and shared-memory opt-in): kron CUDA tests, memcheck of the register-tile and generic
# checks, the register-tile backward timings, the kron bench.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_cuda_tests 40
for chk in kron_bwd_fast_check kron_generic_check; do
  timeout $(cap 200) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/$chk.py > $OUT/memcheck_$chk.txt 2>&1
  echo "memcheck $chk exit $?: $(grep -E "ERROR SUMMARY" $OUT/memcheck_$chk.txt | tail -1); $(grep -c ' ok$' $OUT/memcheck_$chk.txt) ok, $(grep -c WRONG $OUT/memcheck_$chk.txt) wrong"
done
timeout $(cap 330) python3 $R/tools/diag/kron_bwd_fast.py $OUT/kron_bwd_fast.json > $OUT/kron_bwd_fast.txt 2>&1
grep -E "^[0-9]+x" $OUT/kron_bwd_fast.txt | cut -c1-250
diag_kron_bench 560
echo "total $((SECONDS - T0))s after build"
