#!/usr/bin/env bash
# Session 23, calls 7 and 8: every bsr CUDA test at this session's wheel (the fused bias gradient
# on top of session 22's commits, which had not all run on a GPU), in two halves of the collected
# ids (HALF=1 or 2); with HALF=2 also the fused / separate A/B of the cells with empty block rows
# after the column-sum pass's change (tools/diag/bsr_bias_ab.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests_half 540
if [ "${HALF:-1}" = 2 ]; then
  cd $R/tools/diag && timeout $(cap 560) python3 bsr_bias_ab.py tf32:4096:4096:128:0.05 tf32:4096:4096:128:0.1 \
    tf32:4096:4096:64:0.25 bf16:4096:4096:64:0.25 bf16:3072:768:128:0.1 2>&1 | tee $OUT/bias_ab2.txt | grep -v "^ *File\|^    "
fi
echo "total $((SECONDS - T0))s"
