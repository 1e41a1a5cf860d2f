#!/usr/bin/env bash
# Session 39, call 6: the chunked uniform passes writing two outputs j at a time instead of four
# (.whl312: 105 / 96-104 registers in the (16)^3 / (8)^4 forwards instead of 112-113, the (8)^4
# backward's spills 104 -> 64 bytes) against 77bd6f1's wheel (.whl312_old), alternated twice;
# forward and backward device µs; then the small / natural kron CUDA tests at the new wheel.
source "$(dirname "$0")/lib.sh"
_times() { (cd $R/tools/diag && timeout $(cap 150) python3 kron_bwd_times.py "1024 16,16,16" "4096 16,16,16" "256 16,16,16" \
  "1024 8,8,8,8" "4096 8,8,8,8" "256 16,16,16,16"); }
diag_ab_wheels _times
diag_kron_small_natural_tests 220
echo "total $((SECONDS - T0))s"
