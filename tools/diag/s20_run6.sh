#!/usr/bin/env bash
# Session 20, call 6 (wheel of 44853e4's tree): the issue-3 target bench a second time (stk 0.7.1
# side by side), to see which of call 3's tf32 backward cells near 1.3 hold and how far the eager
# 16-bit cells move between runs.
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
diag_bsr_bench 560
tail -45 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s"
