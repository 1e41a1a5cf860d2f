#!/usr/bin/env bash
# Session 10, final call at the committed state: every kron CUDA test, memcheck and racecheck of the
# small-factor forward, kernel times of the small cases, the kron bench.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_cuda_tests 150
diag_kron_small_sanitize 200 memcheck
diag_kron_small_sanitize 250 racecheck
diag_kron_fwd_times 280 "1024 8,8,8,8 auto" "1024 8,8,8,8 old" "1024 16,16,16 auto" "1024 16,16,16 old" "4096 8,8,8,8 auto" "4096 16,16,16 auto"
diag_kron_bench 420
echo "total $((SECONDS - T0))s after build"
