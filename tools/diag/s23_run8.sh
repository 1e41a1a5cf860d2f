#!/usr/bin/env bash
# Session 23, call 11: the 16-bit sm_90a sdd sums A's rows too (the bias gradient of bf16 / fp16
# layers with blocks of 64 and 128 on Hopper): the row-sum, bias, split and sm_90a sdd tests,
# compute-sanitizer memcheck and racecheck of the row-sum tests, and the fused / separate A/B of
# the layers it now fuses (tools/diag/bsr_bias_ab.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 150 "row_sums or bias_grad or bias_gradient or sdd_split_k or sdd_tma or graph_capture"
cd $R/tools/diag && timeout $(cap 300) python3 bsr_bias_ab.py bf16:4096:4096:64:0.25 bf16:4096:4096:128:0.1 \
  bf16:4096:4096:128:0.5 fp16:4096:4096:64:0.1 bf16:3072:768:128:0.1 bf16:3072:768:128:0.5 bf16:768:3072:128:0.1 \
  2>&1 | tee $OUT/bias_ab4.txt | grep -v "^ *File\|^    "; cd /tmp
diag_bsr_sanitize 450 memcheck "row_sums or bias_grad" memcheck_rows2
diag_bsr_sanitize 570 racecheck "test_sdd_row_sums and (float16 or bfloat16) and (64 or 128)" racecheck_rows2
echo "total $((SECONDS - T0))s"
