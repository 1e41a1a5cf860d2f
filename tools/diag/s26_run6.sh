#!/usr/bin/env bash
# Session 26, call 6: tools/diag/kron_lane.cu's half-warp-per-row variant (HALF=1: each lane two
# output columns, 8 FMAs per broadcast float4) against the lane-per-column one and the library.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
python3 $R/tools/diag/kron_lib_graph_us.py 1024:32,32 16:32,32 4096:32,32 2>&1 | tee $OUT/lane.txt
for rows in 1024 16 4096 2048; do
  timeout 20 $R/.diagbin/kron_lane $rows 8 1 2 | tee -a $OUT/lane.txt
  for cfg in "4 1 2" "4 2 2" "4 3 2" "4 2 1" "2 4 2" "8 1 2" "8 1 1"; do
    HALF=1 timeout 20 $R/.diagbin/kron_lane $rows $cfg | tee -a $OUT/lane.txt
  done
done
HALF=1 timeout 60 compute-sanitizer --tool memcheck $R/.diagbin/kron_lane 101 4 2 2 | tail -2
echo "total $((SECONDS - T0))s"
