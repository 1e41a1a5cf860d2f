#!/usr/bin/env bash
# Session 17, call 7: the issue-3 target bench (with stk side by side) at the final grouped dds of
# this session (per-mask wgmma issue, one 256-row A box per step).
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
diag_bsr_bench 560
tail -45 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after install"
