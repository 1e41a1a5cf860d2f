#!/usr/bin/env bash
# Session 23, call 12: final wheel (the 16-bit sm_90a row-sum variant of call 11 reverted; the row
# sums' finish pass adds exactly the splits the SM80 kernel wrote): the sdd, linear-layer, bias,
# row-sum and capture tests, the no-room-for-the-split test, and the A/B once more.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 330 "sdd or linear or bias or row_sums or graph_capture"
cd $R/tools/diag && timeout $(cap 420) python3 bsr_bias_ab.py tf32:4096:4096:64:0.1 tf32:4096:4096:128:0.05 \
  bf16:4096:4096:32:0.05 bf16:4096:4096:64:0.25 2>&1 | tee $OUT/bias_ab5.txt | grep -v "^ *File\|^    "
echo "total $((SECONDS - T0))s"
