#!/usr/bin/env bash
# Session 10, fourth call: the small-factor forward after trimming its index setup and code size:
# kernel times, its CUDA tests, memcheck/racecheck, then the kron bench.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_fwd_times 100 "1024 8,8,8,8 small" "1024 8,8,8,8 small:threads=128" "1024 16,16,16 small" "1024 16,16,16 small:threads=128" \
  "1024 32,32 small" "1024 32,32 new" "4096 8,8,8,8 small" "4096 16,16,16 small"
diag_kron_small_tests 140
diag_kron_small_sanitize 180 memcheck
diag_kron_small_sanitize 230 racecheck
diag_kron_bench 450
echo "total $((SECONDS - T0))s after build"
