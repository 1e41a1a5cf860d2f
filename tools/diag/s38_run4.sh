#!/usr/bin/env bash
# Session 38, call 4: forward plan overrides at the PDL wheel (the planner's choices were measured
# before the forwards launched as dependents): 1024 × (32,32) register-tile rows / tiles / grid,
# (8)^4 and (16)^3 small-factor threads / grid; two rounds, interleaved in one process.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R/tools/diag
timeout $(cap 200) python3 kron_sel_times.py --rounds 2 \
  --sel "auto;new:tile=4,rows=2;new:tile=4,rows=2,grid=132;new:tile=4,rows=1;new:tile=4,rows=1,grid=264;new:tile=4,rows=8;new:tile=8,threads=128,rows=4;new:tile=8,threads=256,rows=8;new:tile=4,rows=4,stages=1" \
  "1024 32,32"
timeout $(cap 400) python3 kron_sel_times.py --rounds 2 \
  --sel "auto;small:threads=128,grid=512;small:threads=128,grid=1024;small:threads=128,grid=396;small:threads=256;small:threads=256,grid=512" \
  "1024 8,8,8,8" "1024 16,16,16"
echo "total $((SECONDS - T0))s"
