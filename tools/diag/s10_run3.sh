#!/usr/bin/env bash
# Session 10, third call: the small-factor forward with one XOR per element address: kernel times
# (both block sizes) against the other kernels, its CUDA tests, ncu with stall-sampled SASS.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_fwd_times 200 "1024 8,8,8,8 small" "1024 8,8,8,8 small:threads=128" "1024 16,16,16 small" "1024 16,16,16 small:threads=128" \
  "1024 32,32 small" "1024 32,32 small:threads=256" "1024 32,32 new" "4096 32,32 small" "4096 32,32 new" \
  "1024 8,16,32 small" "1024 8,16,32 new" "4096 8,8,8,8 small" "4096 16,16,16 small" "4096 16,16,16 small:threads=128"
diag_kron_small_tests 260
for c in "1024 8,8,8,8 small" "1024 16,16,16 small"; do
  diag_ncu_kron_fwd 540 $c kron_small
done
echo "total $((SECONDS - T0))s after build"
