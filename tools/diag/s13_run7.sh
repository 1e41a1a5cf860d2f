#!/usr/bin/env bash
# Session 13, call 7: the bsr CUDA tests of the tf32 paths after the workspace allocation learned
# to fall back (a simulated out-of-memory included).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 150 "tf32 or sdd or linear or workspace or bias"
echo "total $((SECONDS - T0))s after install"
