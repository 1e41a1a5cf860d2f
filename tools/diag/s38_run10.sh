#!/usr/bin/env bash
# Session 38, call 10: the review's test refactor (the dependent-launch tests' shared setup and
# checks) on the GPU: every kron CUDA test, memcheck over the dependent-launch tests, at the final
# wheel (kernels unchanged since call 8).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 150
diag_kron_memcheck_tests 280 "dependent_launch"
echo "total $((SECONDS - T0))s"
