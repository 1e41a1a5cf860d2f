#!/usr/bin/env bash
# Session 10, second call: the small-factor forward (kron_small.h): its kernel time against the
# other kernels on the issue's small cases, its CUDA tests, memcheck and racecheck, ncu.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_fwd_times 200 "1024 8,8,8,8 small" "1024 8,8,8,8 old" "1024 16,16,16 small" "1024 16,16,16 old" "1024 32,32 small" \
  "1024 32,32 new" "4096 32,32 small" "4096 32,32 new" "1024 8,16,32 small" "1024 8,16,32 new" "4096 8,8,8,8 small" "4096 16,16,16 small"
diag_kron_small_tests 260
diag_kron_small_sanitize 320 memcheck
diag_kron_small_sanitize 420 racecheck
diag_ncu_kron_fwd 500 1024 8,8,8,8 small kron_small
echo "total $((SECONDS - T0))s after build"
