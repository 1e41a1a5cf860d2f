#!/usr/bin/env bash
# Session 9, final call (issue 3): the grouped dds rule with its tile-count / blocks-per-column
# conditions. bsr CUDA tests; kernel times of the BERT-base shapes (8192 x 768 -> 3072 and
# 3072 -> 768, b = 128) by default, grouped forced on / off, and static, with the backward's
# kernels; the issue-3 target bench with stk side by side (JSON + summary). Summary lines last.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_stk
diag_bsr_cuda_tests 150
prof() {  # label, env...
  local label=$1; shift
  echo "=== $label"
  env "$@" BSR_PROFILE_BLOCKS=128 BSR_PROFILE_SHAPES=768x3072,3072x768 BSR_PROFILE_DENSITIES=0.1,0.5 timeout $(cap 240) python3 $R/tools/diag/bsr_profile.py bfloat16 2>&1 | grep -E "^b=|dense" | cut -c1-400
}
{
  prof "bf16 BERT shapes (default)" BSR_PROFILE_KERNELS=1
  prof "grouped=1" SPARSEKERN_BSR_GROUPED=1
  prof "grouped=0" SPARSEKERN_BSR_GROUPED=0
  prof "static" SPARSEKERN_BSR_SCHEDULE=static
} > $OUT/bsr_bert_kernel_times.txt 2>&1
cat $OUT/bsr_bert_kernel_times.txt | cut -c1-160
diag_bsr_bench 570
cat $OUT/bsr_summary.txt | cut -c1-130
echo "total $((SECONDS - T0))s after build"
