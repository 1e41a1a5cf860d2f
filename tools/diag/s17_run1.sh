#!/usr/bin/env bash
# Session 17, call 1: the grouped dds with runs of adjacent blocks merged into one wgmma (gdds_run)
# against the committed kernel (gdds_base), both .diagbin/ builds of tools/diag/gdds_trace.cu. The
# merged-run code was dropped (see gdds_issue_blocks in src/bsr/sm90/gdds_sm90.cuh): not in the tree.
cd "$(dirname "$0")/../.." || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv
BINS="gdds_base gdds_run" SHAPES="8192 4096 4096 64 0.1 2;8192 4096 4096 64 0.25 2;8192 4096 4096 64 0.5 2;8192 4096 4096 32 0.25 2;8192 4096 4096 32 0.5 2;8192 4096 4096 128 0.25 2" \
  bash tools/diag/s16_run4.sh
head -c 3000 $OUT/gdds_ab.txt
