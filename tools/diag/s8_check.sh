#!/usr/bin/env bash
# Session 8, check of the final HEAD (host-side clean-up after s8_final): kron CUDA tests and the
# refactored kron_bwd_fast.py.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_cuda_tests 60
timeout $(cap 200) python3 $R/tools/diag/kron_bwd_fast.py > $OUT/kron_bwd_fast.txt 2>&1
echo "kron_bwd_fast exit $?"
grep -E "^[0-9]+x|kernels:" $OUT/kron_bwd_fast.txt | cut -c1-200 | head -6
echo "total $((SECONDS - T0))s after build"
