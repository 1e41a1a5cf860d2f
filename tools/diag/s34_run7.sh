#!/usr/bin/env bash
# Session 34, call 7: the small-factor forward with each thread copying the X its first pass reads
# (no barrier at the top of a tile after the first; the next tile's copy issued in the second pass)
# (new wheel) against d885b2e's kernels (.whl312_old), alternated old/new/old/new
# (kron_sel_times.py: forward device µs); then with the new wheel the small-factor / natural-split
# CUDA tests and racecheck + memcheck over kron_small_check.py.
source "$(dirname "$0")/lib.sh"
_fwd() {
  (cd $R/tools/diag && timeout $(cap 240) python3 kron_sel_times.py --sel "auto" --rounds 2 "1024 16,16,16" \
    "4096 16,16,16" "2048 16,16,16" "512 16,16,16" "1024 8,8,8,8" "4096 8,8,8,8" "1024 16,16,8" "1024 16,8,8" \
    "1024 4,4,4,4,4" "1024 8,16,16" "256 16,16,16,16" "64 8,8,8,8,8" "1024 8,8,32")
}
diag_ab_wheels _fwd
diag_kron_small_tests 330
diag_kron_small_natural_tests 370
diag_kron_small_sanitize 440 racecheck
diag_kron_small_sanitize 500 memcheck
echo "total $((SECONDS - T0))s"
