#!/usr/bin/env bash
# Session 26, call 12: the concurrent weight gradient only inside a CUDA-graph capture (the final
# rule): its tests, the capture / backward / bias-gradient bsr tests, memcheck over the concurrent
# ones, and the issue-3 target bench with stk at this wheel.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_stk
diag_bsr_cuda_tests 150 "concurrent or cuda_graph_capture or backward or bias_grad or linear"
diag_bsr_sanitize 220 memcheck "concurrent" concurrent
diag_bsr_bench 590
head -3 $OUT/bsr_summary.txt; tail -4 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s"
