#!/usr/bin/env bash
# Session 20, call 5 (wheel of 44853e4's tree, no kron change): where the backward of the kron cases
# still above 2.5x their forward spends its time, per kernel (tools/diag/kron_bwd_kernels.py: the
# forward keeps its states, 20 backward calls under the profiler), with 1024 x (32,32) and
# 4096 x (32,32) (the natural split's tail over M * p0 rows at 128 x (32,32,32)) for reference.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 200) python3 $R/tools/diag/kron_bwd_kernels.py "128 32,32,32" "4096 32,32" "1024 32,32" "1024 16,16,16" "1024 8,8,8,8" 2>&1 | cut -c1-900
echo "total $((SECONDS - T0))s"
