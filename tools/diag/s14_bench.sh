#!/usr/bin/env bash
# Session 14, the issue-3 target bench at the final state (stk 0.7.1 side by side), on an H100 like
# session 13's.
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
diag_bsr_bench 560
tail -45 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after install"
