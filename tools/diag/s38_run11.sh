#!/usr/bin/env bash
# Session 38, call 11: the small forward's block size and grid again at the final wheel (uniform-
# shape kernels), 1024 × (16)^3 and (8)^4, two rounds interleaved in one process.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R/tools/diag
timeout $(cap 150) python3 kron_sel_times.py --rounds 2 \
  --sel "auto;small:threads=256;small:threads=128,grid=1024;small:threads=256,grid=512" \
  "1024 16,16,16" "1024 8,8,8,8" "4096 8,8,8,8"
echo "total $((SECONDS - T0))s"
