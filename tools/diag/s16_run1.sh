#!/usr/bin/env bash
# Session 16, call 1: where the grouped Hopper dds spends a tile (tools/diag/gdds_trace.cu, built on
# the CPU machine into .diagbin/ and carried). No wheel needed.
cd "$(dirname "$0")/../.." || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
B=.diagbin/gdds_trace
for args in "8192 4096 4096 128 0.05 2" "8192 4096 4096 128 0.1 2" "8192 4096 4096 128 0.25 2" \
            "8192 4096 4096 128 0.5 2" "8192 4096 4096 128 0.1 0" "8192 4096 4096 128 0.25 0" \
            "8192 4096 4096 64 0.1 2" "8192 4096 4096 64 0.25 2" "8192 4096 4096 64 0.5 2" \
            "8192 4096 4096 128 1.0 0"; do
  timeout 60 $B $args 30 2>&1 | tee -a $OUT/gdds_trace.txt
  echo | tee -a $OUT/gdds_trace.txt
done
