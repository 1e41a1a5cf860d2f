#!/usr/bin/env bash
# Session 13, call 11: the full bsr CUDA suite (every kernel x schedule subprocess test included)
# at the final state (wheel of 4ce8b19).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 230
echo "total $((SECONDS - T0))s after install"
