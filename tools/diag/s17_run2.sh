#!/usr/bin/env bash
# Session 17, call 2: merged runs of adjacent blocks, serialized by ptxas (C7511) wherever runs of
# different lengths share accumulators: gdds_m4 (any run), gdds_m2 (runs of at most 2), gdds_h1
# (runs of 1: the code path that was kept, gdds_issue_blocks) against gdds_base. The GDDS_MAXRUN
# switch and the merging were dropped after this call.
cd "$(dirname "$0")/../.." || exit 1
BINS="gdds_base gdds_h1 gdds_m2 gdds_m4" SHAPES="8192 4096 4096 32 0.25 2;8192 4096 4096 32 0.4 2;8192 4096 4096 32 0.5 2;8192 4096 4096 32 0.75 2;8192 4096 4096 64 0.5 2" \
  bash tools/diag/s16_run4.sh
