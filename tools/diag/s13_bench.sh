#!/usr/bin/env bash
# Session 13, call 4: the bsr CUDA tests of the layer, its backward and the bias gradient, then
# the issue-3 target bench at this session's state, stk 0.7.1 side by side (carry .whl312, .whl).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_stk
diag_bsr_cuda_tests 70 "bias or linear or backward or tf32"
diag_bsr_bench 575
grep -E "8192x4096" $OUT/bsr_summary.txt | cut -c1-130
tail -1 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after install"
