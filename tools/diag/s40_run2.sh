#!/usr/bin/env bash
# (The wheels measured here were built from uncommitted changes, described and dropped in
# docs/PERF_NOTES.md, kron, session 40; the script is the record of the call.)
# Session 40, call 2: three wheels alternated twice: .whl312_old (52c351b), .whl312_s4 and .whl312_s2
# (a block's first tile copied in four / two parts in the uniform-shape small forwards, the first
# pass run part by part, the next tile's copy issued only once the last part is in; four parts
# apply to (8)^4 only); forward device µs. Then memcheck / racecheck of the small forward's check
# script at .whl312_s2.
source "$(dirname "$0")/lib.sh"
diag_begin_ab
_times() { (cd $R/tools/diag && timeout $(cap 200) python3 kron_fwd_times.py "1024 16,16,16" "4096 16,16,16" "256 16,16,16" \
  "1024 8,8,8,8" "4096 8,8,8,8" "256 8,8,8,8" "16 8,8,8,8"); }
diag_ab_wheel_list "old s4 s2" _times
echo "== checks at the s2 wheel ($((SECONDS - T0))s)"
diag_kron_small_sanitize 300 memcheck
diag_kron_small_sanitize 400 racecheck
echo "total $((SECONDS - T0))s"
