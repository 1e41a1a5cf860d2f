#!/usr/bin/env bash
# Session 9, final call at the committed state (issue 3): bsr CUDA tests without the
# subprocess-per-kernel ones (those ran in s9_final.sh on the same kernels) plus one of them, and
# the issue-3 target bench with stk side by side (JSON + summary). Summary lines last.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_stk
diag_bsr_cuda_tests 110 "not each_kernel or one-column-heavy"
diag_bsr_bench 440
cat $OUT/bsr_summary.txt | cut -c1-130
echo "total $((SECONDS - T0))s after build"
