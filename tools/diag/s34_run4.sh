#!/usr/bin/env bash
# Session 34, call 4: the small-factor forward with its final pass's store form fixed at compile time
# (a kernel per vec_y; call 3's ncu showed the run-time choice if-converted, every vector store
# issued beside its predicated-off scalar pair) and the stores as asm without a memory clobber
# (new wheel) against 1214261's (.whl312_old), alternated old/new/old/new (kron_bwd_times.py).
source "$(dirname "$0")/lib.sh"
diag_kron_bwd_ab 300 "1024 16,16,16" "4096 16,16,16" "2048 16,16,16" "512 16,16,16" "1024 8,8,8,8" \
  "4096 8,8,8,8" "1024 16,16,8" "1024 4,4,4,4,4" "256 16,16,16,16" "64 8,8,8,8,8"
echo "total $((SECONDS - T0))s"
