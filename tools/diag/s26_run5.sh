#!/usr/bin/env bash
# Session 26, call 5: tools/diag/kron_lane.cu with 1, 4 and 8 independent FMA chains per lane
# (-DKILP, built on the CPU machine into .diagbin/kron_lane_ilpN), device µs per call.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
python3 $R/tools/diag/kron_lib_graph_us.py 1024:32,32 16:32,32 4096:32,32 2>&1 | tee $OUT/lane.txt
for k in 1 4 8; do
  for rows in 1024 16 4096; do
    for cfg in "4 2 2" "8 1 2" "8 2 1"; do
      echo "ilp $k: $(timeout 20 $R/.diagbin/kron_lane_ilp$k $rows $cfg)" | tee -a $OUT/lane.txt
    done
  done
done
echo "total $((SECONDS - T0))s"
