#!/usr/bin/env bash
# Session 23, call 9: at the final wheel (the layer's backward asks for the fused row sums only where
# the HMMA sdd runs the product: bsr_sdd_row_sums_fused), the row-sum and bias tests, the fused /
# separate A/B of the cells that had lost with the column-sum pass (tools/diag/bsr_bias_ab.py), and
# the issue-3 target bench (SPARSEKERN_BENCH_BSR=targets), stk side by side.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_stk
diag_bsr_cuda_tests 100 "row_sums or bias_grad or bias_gradient or linear_tf32"
cd $R/tools/diag && timeout $(cap 200) python3 bsr_bias_ab.py bf16:4096:4096:64:0.25 bf16:3072:768:128:0.1 \
  tf32:4096:4096:64:0.1 tf32:4096:4096:128:0.1 2>&1 | tee $OUT/bias_ab3.txt | grep -v "^ *File\|^    "; cd /tmp
diag_bsr_bench 580
head -3 $OUT/bsr_summary.txt; tail -4 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s"
