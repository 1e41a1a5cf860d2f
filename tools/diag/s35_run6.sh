#!/usr/bin/env bash
# Session 35, call 6: the partial-∂ℓ/∂F reduction launch with 32 warps per block instead of 8 (each
# warp's chain of dependent L2 loads ~8 long instead of ~33 at 264 partials; new wheel, .whl312)
# against 8479c3b's (.whl312_old), alternated old/new/old/new (kron_bwd_times.py); then every kron
# CUDA test with the new wheel.
source "$(dirname "$0")/lib.sh"
diag_kron_bwd_ab 200 "1024 8,8,8,8" "1024 16,16,16" "1024 16,8,8" "1024 4,4,4,4,4" "1024 32,32" "1024 64,64" \
  "256 16,16,16,16" "128 32,32,32" "16 32,32"
diag_kron_cuda_tests 380
echo "total $((SECONDS - T0))s"
