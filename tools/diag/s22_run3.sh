#!/usr/bin/env bash
# Session 22, call 3: the issue-3 target bench with the SM80 sdd's split K (auto), and the split
# tests again (call 2's six b = 16 failures were the test's: those patterns take the dense path).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_stk
diag_bsr_cuda_tests 120 "sdd_split_k_sm80 or falls_back"
diag_bsr_bench 560
head -3 $OUT/bsr_summary.txt; tail -4 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s"
