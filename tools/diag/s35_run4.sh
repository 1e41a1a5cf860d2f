#!/usr/bin/env bash
# Session 35, call 4: every CUDA test at 8479c3b's wheel (the bindings take read-only operands and name
# read-only outputs; kernels as in call 3), four test processes sharing the GPU, with
# `sparsekern check` beside them.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_all_cuda_tests_and_check 570
echo "total $((SECONDS - T0))s"
