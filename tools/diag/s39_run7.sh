#!/usr/bin/env bash
# Session 39, call 7: the final commit's wheel (69caa22: the store-form dispatch shared by the
# launcher and the CPU emulation; kernels' SASS unchanged): forward / backward device µs of the
# uniform and generic small shapes, every kron CUDA test, memcheck over the small-kernel tests.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
(cd $R/tools/diag && timeout $(cap 60) python3 kron_bwd_times.py "1024 16,16,16" "1024 8,8,8,8" "64 16,16,16" "1024 16,8,8")
diag_kron_cuda_tests 200
diag_kron_memcheck_tests 280 "forward_small or backward_small"
echo "total $((SECONDS - T0))s"
