#!/usr/bin/env bash
# Session 19, call 15: after the review tidy-ups (one width dispatch for the kron backward's launcher
# and CPU emulation, a dead branch, the sdd's nnz set where its parameters are built): the kron
# CUDA tests, the bsr sdd CUDA tests (grouped and not), memcheck of the kron backward.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 200
diag_bsr_cuda_tests 330 "sdd"
diag_kron_bwd_sanitize 420 470
echo "total $((SECONDS - T0))s after install"
