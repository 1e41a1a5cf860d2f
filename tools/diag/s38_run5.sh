#!/usr/bin/env bash
# Session 38, call 5: ncu of the small-factor forward at 1024 × (8)^4 and (16)^3 on the PDL wheel:
# speed of light, warp states, scheduler, and the stall reasons per SASS line (ncu_stalls.py);
# the source-counter CSVs come back gzipped for ncu_regions.py.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_ncu_kron_fwd 150 1024 8,8,8,8 small kron_small
diag_ncu_kron_fwd 300 1024 16,16,16 small kron_small
gzip -f $OUT/*.csv
echo "total $((SECONDS - T0))s"
