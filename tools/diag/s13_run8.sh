#!/usr/bin/env bash
# Session 13, call 8: the tf32 copies' threshold away from 4096 x 4096: the BERT-base shapes
# (768 -> 3072, 3072 -> 768, 8192 rows), kernel split with and without the copies.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
for c in 1 0; do
  echo "=== tf32, SPARSEKERN_BSR_TF32_COPIES=$c" >> $OUT/bsr_tf32_bert.txt
  SPARSEKERN_BSR_TF32_COPIES=$c BSR_PROFILE_KERNELS=1 BSR_PROFILE_BLOCKS=64,128 BSR_PROFILE_SHAPES=768x3072,3072x768 \
    BSR_PROFILE_DENSITIES=0.1,0.25,0.5 timeout $(cap 250) python3 $R/tools/diag/bsr_profile.py tf32 >> $OUT/bsr_tf32_bert.txt 2>&1
done
grep -E "^b=|dense|===" $OUT/bsr_tf32_bert.txt | cut -c1-100
echo "total $((SECONDS - T0))s after install"
