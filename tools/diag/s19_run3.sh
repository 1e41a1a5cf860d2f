#!/usr/bin/env bash
# Session 19, call 3 (wheel of 7c2a62f): the small-factor forward's grid and threads at the shapes
# near the roofline target (1024 × (16^3) at 59.7-60.2%), plan choice (auto) against overrides,
# interleaved twice in one process (tools/diag/kron_sel_times.py).
source "$(dirname "$0")/lib.sh"
rm -rf .whl312 && cp -r .whl312_old .whl312
diag_begin_wheel
timeout $(cap 250) python3 $R/tools/diag/kron_sel_times.py --rounds 2 \
  --sel "auto;small:grid=264;small:grid=396;small:grid=512;small:grid=1024;small:threads=256;small:threads=256,grid=264" \
  "1024 16,16,16" "1024 8,8,8,8" "4096 8,8,8,8" "2048 16,16,16"
echo "total $((SECONDS - T0))s"
