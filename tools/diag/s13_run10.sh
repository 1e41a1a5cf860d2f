#!/usr/bin/env bash
# Session 13, call 10: call 9's test step hit its time cap inside the slow subprocess tests; the
# tf32/workspace/bias/sdd/linear bsr CUDA tests alone.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 150 "(tf32 or workspace or bias or sdd or linear) and not each_kernel"
echo "total $((SECONDS - T0))s after install"
