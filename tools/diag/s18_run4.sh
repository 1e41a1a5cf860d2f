#!/usr/bin/env bash
# Session 18, call 4: the register-tile backward with coalesced transposed factor copies (a warp
# reads 8 consecutive j of 4 rows) against the wheel of 192a2c2, interleaved twice; the kron CUDA
# tests; compute-sanitizer memcheck and racecheck of the backward (tools/diag/kron_bwd_fast_check.py).
source "$(dirname "$0")/lib.sh"
CASES=("16 32,32" "1024 32,32" "1024 64,64" "4096 64,64" "128 32,32,32")
ab_times() { timeout $(cap 200) python3 $R/tools/diag/kron_fwd_times.py "${CASES[@]}" --save; }
diag_ab_wheels ab_times
diag_kron_cuda_tests 300
diag_kron_bwd_sanitize 420 520
echo "total $((SECONDS - T0))s"
