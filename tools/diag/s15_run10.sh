#!/usr/bin/env bash
# Session 15, call 10: call 9's comparison at the BERT-base shapes (8192 rows, 768 <-> 3072) and at
# 1024 / 2048 rows of the 4096 layer, blocks of 64 and 128: where the grouped kernel's rules
# (kGroupedMinDensity128, kGroupedMinBlocksPerCol128, kGroupedMinWaves) should now sit.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
BSR_EPI_SHAPES=8192x768x3072,8192x3072x768,2048x4096x4096 BSR_EPI_DTYPES=bf16 BSR_EPI_BLOCKS=64,128 BSR_EPI_DENSITIES=0.05,0.1,0.25,0.5 timeout $(cap 300) python3 $R/tools/diag/bsr_epilogue.py > $OUT/bsr_epilogue_bert.txt 2>&1; echo "exit $?"
cat $OUT/bsr_epilogue_bert.txt
echo "total $((SECONDS - T0))s after install"
