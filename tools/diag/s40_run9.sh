#!/usr/bin/env bash
# Session 40, call 9: the issue-3 target bench with stk at 13d5882 (the wheel of 52c351b, whose
# library is 13d5882's, with this tree's Python package copied over it: the tile counter no longer
# zero-filled per captured call).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_copy_package
diag_stk
diag_bsr_bench 390
head -3 $OUT/bsr_summary.txt; tail -4 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s"
