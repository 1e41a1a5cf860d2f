#!/usr/bin/env bash
# Session 13, call 3: the bsr CUDA tests of the layer and the backward (after the backward's
# checked fast path), and the bias-gradient alternatives (tools/diag/bias_grad.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 120 "linear or backward or grad or tf32"
timeout $(cap 200) python3 $R/tools/diag/bias_grad.py > $OUT/bias_grad.txt 2>&1; cat $OUT/bias_grad.txt
echo "total $((SECONDS - T0))s after install"
