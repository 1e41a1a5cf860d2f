#!/usr/bin/env bash
# Session 34, call 1: HEAD's wheel (.whl312_old) against one with (a) the small-factor forward at six
# 128-thread blocks per SM (launch bounds ≤ 80 registers, planner grid 6 per SM) and (b) the small
# backward one block fewer per SM below 8.5 tiles per SM, alternated old/new/old/new. Forward: each
# wheel's default, and grid caps of 4 and 5 blocks per SM (528, 660) in the same process; backward:
# kron_bwd_times.py over row counts. Then with the new wheel the small-factor forward / backward
# CUDA tests and memcheck of kron_small_check.py.
source "$(dirname "$0")/lib.sh"
FWD_CASES=("1024 16,16,16" "1024 8,8,8,8" "4096 16,16,16" "4096 8,8,8,8" "1024 4,4,4,4,4" "1024 16,8,8"
           "256 16,16,16,16" "64 8,8,8,8,8" "2048 16,16,16" "512 16,16,16")
BWD_CASES=("512 16,16,16" "768 16,16,16" "1024 16,16,16" "1188 16,16,16" "2048 16,16,16" "4096 16,16,16"
           "1024 8,16,16" "1024 16,16,8" "1024 8,8,8,8" "1024 4,4,4,4,4" "256 16,16,16,16")
_both() {
  (cd $R/tools/diag && timeout $(cap 420) python3 kron_sel_times.py --sel "auto;small:grid=528;small:grid=660" --rounds 1 "${FWD_CASES[@]}")
  (cd $R/tools/diag && timeout $(cap 420) python3 kron_bwd_times.py "${BWD_CASES[@]}")
}
diag_ab_wheels _both
diag_kron_small_tests 480
diag_kron_small_natural_tests 520
diag_kron_small_sanitize 560 memcheck
echo "total $((SECONDS - T0))s"
