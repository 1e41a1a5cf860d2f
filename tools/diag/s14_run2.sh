#!/usr/bin/env bash
# Session 14, call 2 (wheel with the dense sdd thresholds and the dense dds path, placeholder dds
# thresholds): the bsr CUDA tests of the dense paths, sdd, workspaces and linear layers, then the
# forward and input-gradient dds with the dense path forced on (SPARSEKERN_BSR_DDS_DENSE=1) and off
# (=0): bf16 and tf32, 4096 -> 4096 at 8192 and 1024 rows, the BERT-base shapes at 8192.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 120 "(tf32 or workspace or bias or sdd or linear or dense) and not each_kernel"
for mode in 0 1; do
  SPARSEKERN_BSR_DDS_DENSE=$mode DDS_SHAPES=4096x4096 DDS_ROWS=8192,1024 timeout $(cap 300) \
    python3 $R/tools/diag/bsr_dds_dense.py bfloat16 tf32 >> $OUT/dds_dense.txt 2>&1
  SPARSEKERN_BSR_DDS_DENSE=$mode DDS_SHAPES=768x3072,3072x768 DDS_ROWS=8192 timeout $(cap 420) \
    python3 $R/tools/diag/bsr_dds_dense.py bfloat16 tf32 >> $OUT/dds_dense.txt 2>&1
done
grep -cE "^mode" $OUT/dds_dense.txt
grep -E "Error|error:" $OUT/dds_dense.txt | head -5
echo "total $((SECONDS - T0))s after install"
