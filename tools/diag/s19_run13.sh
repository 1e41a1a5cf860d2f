#!/usr/bin/env bash
# Session 19, call 13 (wheel of 4f5abf9): the bsr tests that rerun CUDA tests in a fresh process
# under a switch, after they were folded onto one helper (_cuda_tests_in_fresh_process).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 400 "sdd_group_each or sdd_whole_block_tiles_each"
echo "total $((SECONDS - T0))s after install"
