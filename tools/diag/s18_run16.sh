#!/usr/bin/env bash
# Session 18, call 16 (wheel of ac7d68f): the register-tile forward's plan overrides at 1024 rows
# after the natural-order X change (session 14's sweep chose 256 threads there: 38.5 vs 40.3 µs).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
for r in 1 2; do
  for sel in auto new:threads=128 new:threads=128,rows=1 new:threads=256,rows=2 new:threads=256,stages=1; do
    timeout $(cap 200) python3 $R/tools/diag/kron_fwd_one.py 1024 64,64 $sel --time
  done
  for sel in auto new:tile=8 new:tile=8,threads=128 new:tile=4,rows=2; do
    timeout $(cap 280) python3 $R/tools/diag/kron_fwd_one.py 1024 32,32 $sel --time
  done
done
echo "total $((SECONDS - T0))s after install"
