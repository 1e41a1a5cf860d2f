#!/usr/bin/env bash
# (The wheels measured here were built from uncommitted changes, described and dropped in
# docs/PERF_NOTES.md, kron, session 40; the script is the record of the call.)
# Session 40, call 1: three wheels alternated twice (the new one last): .whl312_old (52c351b), .whl312 (a block's first
# tile copied in two parts in the uniform-shape small forwards, the first pass run part by part;
# the small backward waiting for a tile's ∂ℓ/∂Y only after its recompute passes),
# .whl312_p4 (four parts where the first pass has four fibers per thread: (8)^4); forward and backward device µs.
# Then at the new wheel the small / natural kron CUDA tests and memcheck / racecheck of both
# small-kernel check scripts.
source "$(dirname "$0")/lib.sh"
diag_begin_ab
_times() { (cd $R/tools/diag && timeout $(cap 330) python3 kron_bwd_times.py "1024 16,16,16" "4096 16,16,16" "256 16,16,16" \
  "1024 8,8,8,8" "4096 8,8,8,8" "256 8,8,8,8" "16 8,8,8,8" "1024 16,8,8"); }
diag_ab_wheel_list "old p4 new" _times
echo "== checks at the new wheel ($((SECONDS - T0))s)"
diag_kron_small_natural_tests 450
diag_kron_small_sanitize_both 570
echo "total $((SECONDS - T0))s"
