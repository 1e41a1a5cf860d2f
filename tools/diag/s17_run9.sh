#!/usr/bin/env bash
# Session 17, call 9: the grouped dds's stages released by one arrive per consumer warp (gdds_epw,
# empty barriers of 8 arrivals) against one per consumer thread (gdds_ept, 256, as committed),
# .diagbin/ builds of tools/diag/gdds_trace.cu. Dropped after this call (no GDDS_EMPTY_PER_WARP in the tree).
cd "$(dirname "$0")/../.." || exit 1
BINS="gdds_ept gdds_epw" SHAPES="8192 4096 4096 32 0.25 2;8192 4096 4096 32 0.5 2;8192 4096 4096 64 0.1 2;8192 4096 4096 64 0.5 2;8192 4096 4096 128 0.1 2;8192 4096 4096 128 0.25 2;2300 4096 4096 64 0.25 2" \
  bash tools/diag/s16_run4.sh
