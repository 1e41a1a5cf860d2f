#!/usr/bin/env bash
# Session 36, call 7: as call 5, with the transposed factor copies from 16-byte loads (this commit), against
# 1848f75 again (call 2's faster forward, backward unchanged):
# device µs old/new/old/new of the plain and training forwards and the kept backward, then every
# kron CUDA test, memcheck and racecheck of the fast backward's check script at the new wheel.
source "$(dirname "$0")/lib.sh"
ab() {
  timeout $(cap 120) python3 $R/tools/diag/kron_fwd_times.py "1024 64,64" "4096 64,64" "1024 32,32" "16 32,32" \
    "32 64,64" "2048 32,32" "128 32,32,32" --save
}
diag_ab_wheels ab
diag_kron_cuda_tests 250
diag_kron_bwd_sanitize 400 520
echo "total $((SECONDS - T0))s"
