#!/usr/bin/env bash
# Session 10, sixth call: the small-factor forward per largest width, Gray-code order: kernel times,
# its CUDA tests, memcheck.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_fwd_times 100 "1024 8,8,8,8 small" "1024 8,8,8,8 small:threads=256" "1024 16,16,16 small" "1024 16,16,16 small:threads=256" \
  "1024 32,32 small" "1024 32,32 new" "4096 8,8,8,8 small" "4096 16,16,16 small" "1024 8,16,32 small" "1024 8,16,32 new"
diag_kron_small_tests 140
diag_kron_small_sanitize 180 memcheck
echo "total $((SECONDS - T0))s after build"
