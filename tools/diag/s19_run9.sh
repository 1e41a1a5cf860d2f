#!/usr/bin/env bash
# Session 19, call 9 (the final bsr code: the grouped sdd for 16-bit blocks of 32 only): the bsr sdd
# CUDA tests (test_sdd_group_each runs grouped and one block per CTA), then the issue-3 target bench
# with stk side by side.
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
diag_bsr_cuda_tests 150 "sdd"
diag_bsr_bench 590
tail -45 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after install"
