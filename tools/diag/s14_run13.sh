#!/usr/bin/env bash
# Session 14, call 13 (final wheel, H100): the dds dense path's crossings again for blocks of 16 and
# 32 after the faster scatter and the fp32 bias change: block-sparse (=0) vs dense path (=1), bf16 and
# tf32, 4096 -> 4096 at 8192 and 1024 rows and the BERT-base shapes at 8192.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
for mode in 0 1; do
  SPARSEKERN_BSR_DDS_DENSE=$mode DDS_BLOCKS=16,32 DDS_DENSITIES=0.05,0.1,0.2,0.3,0.4,0.5 DDS_SHAPES=4096x4096 \
    DDS_ROWS=8192,1024 timeout $(cap 250) python3 $R/tools/diag/bsr_dds_dense.py bfloat16 tf32 >> $OUT/dds_cross.txt 2>&1
  SPARSEKERN_BSR_DDS_DENSE=$mode DDS_BLOCKS=16,32 DDS_DENSITIES=0.05,0.1,0.2,0.3,0.4,0.5 DDS_SHAPES=768x3072,3072x768 \
    DDS_ROWS=8192 timeout $(cap 480) python3 $R/tools/diag/bsr_dds_dense.py bfloat16 tf32 >> $OUT/dds_cross.txt 2>&1
done
grep -cE "^mode" $OUT/dds_cross.txt; grep -E "Error" $OUT/dds_cross.txt | head -3
echo "total $((SECONDS - T0))s after install"
