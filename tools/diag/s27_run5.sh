#!/usr/bin/env bash
# Session 27, call 5: the issue-3 target bench with stk at the final wheel (the captured backward's
# fork on by default; device times of backward rows are CUDA-graph captures, so they take it).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_stk
diag_bsr_bench 430
head -3 $OUT/bsr_summary.txt; tail -4 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s"
