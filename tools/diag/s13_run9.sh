#!/usr/bin/env bash
# Session 13, call 9: the dds block copies only from 1.5 blocks per block column. The tf32/sdd/
# linear/workspace bsr CUDA tests, and the BERT-base tf32 split again (default vs no copies).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 120 "tf32 or sdd or linear or workspace or bias or grouped_edges"
for c in 1 0; do
  echo "=== tf32, SPARSEKERN_BSR_TF32_COPIES=$c" >> $OUT/bsr_tf32_bert.txt
  SPARSEKERN_BSR_TF32_COPIES=$c BSR_PROFILE_KERNELS=1 BSR_PROFILE_BLOCKS=64,128 BSR_PROFILE_SHAPES=3072x768,4096x4096 \
    BSR_PROFILE_DENSITIES=0.1,0.25 timeout $(cap 250) python3 $R/tools/diag/bsr_profile.py tf32 >> $OUT/bsr_tf32_bert.txt 2>&1
done
grep -E "^b=|dense|===" $OUT/bsr_tf32_bert.txt | cut -c1-100
echo "total $((SECONDS - T0))s after install"
