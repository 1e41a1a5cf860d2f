#!/usr/bin/env bash
# Session 38, call 9: ncu of the small forward's uniform-shape kernels at the final wheel (1024 ×
# (16)^3 and (8)^4): speed of light, warp states, stalls per SASS line; source CSVs gzipped for
# ncu_regions.py.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_ncu_kron_fwd 150 1024 16,16,16 small kron_small
diag_ncu_kron_fwd 300 1024 8,8,8,8 small kron_small
gzip -f $OUT/*.csv
echo "total $((SECONDS - T0))s"
