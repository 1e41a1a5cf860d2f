#!/usr/bin/env bash
# Session 10, last call: every kron CUDA test and the small cases' times after the host-side refactor
# of the fp32 forward arguments (fp32_io) and the diag scripts' helpers.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_cuda_tests 150
diag_kron_fwd_times 200 "1024 8,8,8,8 auto" "1024 16,16,16 auto" "1024 32,32 auto"
echo "total $((SECONDS - T0))s after build"
