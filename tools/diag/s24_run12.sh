#!/usr/bin/env bash
# Session 24, call 12 (wheel of 62f3052: Backend::factor_grad, which the CUDA backend declines, so
# its GEMM steps keep cuBLAS's batched GEMMs): every kron CUDA test.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 200
echo "total $((SECONDS - T0))s after install"
