#!/usr/bin/env bash
# Session 17, call 4: the grouped dds's A loads as one 256-row TMA box per step (gdds_box256, the
# then-default of a SPARSEKERN_GDDS_A_BOX switch, since removed with the two-box path) against two
# 128-row boxes (gdds_box128), .diagbin/ builds of
# tools/diag/gdds_trace.cu; 2300 rows check a partial last tile.
cd "$(dirname "$0")/../.." || exit 1
BINS="gdds_box128 gdds_box256" SHAPES="8192 4096 4096 32 0.25 2;8192 4096 4096 32 0.5 2;8192 4096 4096 64 0.1 2;8192 4096 4096 64 0.5 2;8192 4096 4096 128 0.1 2;8192 4096 4096 128 0.5 2;2300 4096 4096 32 0.5 2;2300 4096 4096 128 0.25 2" \
  bash tools/diag/s16_run4.sh
