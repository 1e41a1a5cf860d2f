#!/usr/bin/env bash
# Session 17, call 10: every bsr CUDA test at the final wheel of this session.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 240
echo "total $((SECONDS - T0))s after install"
