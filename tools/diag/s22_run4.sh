#!/usr/bin/env bash
# Session 22, calls 4 and 5: every bsr CUDA test at the final kernels, in two halves of the collected
# ids (HALF=1 or 2), so that each fits a call.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests_half 570
echo "total $((SECONDS - T0))s"
