#!/usr/bin/env bash
# Session 19, call 2 (wheel of 7c2a62f): how much of the kron forwards and training backwards near
# their targets is launch gaps (graph time against the sum of kernel durations), and their plans.
source "$(dirname "$0")/lib.sh"
rm -rf .whl312 && cp -r .whl312_old .whl312
diag_begin_wheel
timeout $(cap 200) python3 $R/tools/diag/kron_gaps.py "1024 64,64" "1024 16,16,16" "1024 8,8,8,8" "128 32,32,32" "4096 64,64" "1024 32,32"
echo "total $((SECONDS - T0))s"
