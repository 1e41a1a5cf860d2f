#!/usr/bin/env bash
# Session 35, call 3: every CUDA test at the session's final kernels (the wheel of 9ed4752's tree,
# the session-34 kernels), four test processes sharing the GPU (diag_all_cuda_tests), with
# `sparsekern check` beside them.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_all_cuda_tests_and_check 570
echo "total $((SECONDS - T0))s"
