#!/usr/bin/env bash
# Session 17, call 6: the grouped dds with k steps of 32 for blocks of 64 and 128 (gdds_bk32, built
# with -DSPARSEKERN_GDDS_BK=32: 24 KB stages, 8 of them, instead of 4 of 48 KB) against the default
# (gdds_box256), .diagbin/ builds of tools/diag/gdds_trace.cu. The SPARSEKERN_GDDS_BK switch was
# removed after this call.
cd "$(dirname "$0")/../.." || exit 1
BINS="gdds_box256 gdds_bk32" SHAPES="8192 4096 4096 64 0.1 2;8192 4096 4096 64 0.25 2;8192 4096 4096 64 0.5 2;8192 4096 4096 128 0.1 2;8192 4096 4096 128 0.25 2;8192 4096 4096 128 0.5 2" \
  bash tools/diag/s16_run4.sh
grep -E "^== |MMA phase|per k step" $OUT/gdds_ab.txt | head -24
