#!/usr/bin/env bash
# Session 18, call 8: the ∂ℓ/∂F reduction kernel with 32 warps per block instead of 8 (more of the
# L2-resident partials in flight) against the wheel of the commit before it, interleaved twice;
# also the kernels of one backward (kron_bwd_kernels.py); the kron CUDA
# tests; compute-sanitizer memcheck and racecheck of the backward (tools/diag/kron_bwd_fast_check.py).
source "$(dirname "$0")/lib.sh"
CASES=("16 32,32" "1024 32,32" "1024 64,64" "4096 64,64" "128 32,32,32" "1024 8,8,8,8" "1024 16,16,16" "256 16,16,16,16")
ab_times() { timeout $(cap 200) python3 $R/tools/diag/kron_fwd_times.py "${CASES[@]}" --save; }
diag_ab_wheels ab_times
timeout $(cap 240) python3 $R/tools/diag/kron_bwd_kernels.py "1024 64,64" "4096 64,64" "1024 32,32" "1024 8,8,8,8" "1024 16,16,16"
diag_kron_cuda_tests 300
diag_kron_bwd_sanitize 420 520
echo "total $((SECONDS - T0))s"
