#!/usr/bin/env bash
# Session 26, calls 3-4: tools/diag/kron_lane.cu (a lane-per-output-column two-factor forward, built on
# the CPU machine into .diagbin/) against the library's kernel at (32 ⊗ 32), device µs per call;
# EMPTY=1: the same launches of a kernel that does nothing (the graph's floor per call).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
python3 $R/tools/diag/kron_lib_graph_us.py 1024:32,32 16:32,32 4096:32,32 2>&1 | tee $OUT/lane.txt
for rows in 1024 16 4096; do
  for cfg in "4 2 2" "8 1 2" "8 2 2" "8 2 1"; do
    timeout 20 $R/.diagbin/kron_lane $rows $cfg | tee -a $OUT/lane.txt
  done
  EMPTY=1 timeout 20 $R/.diagbin/kron_lane $rows 8 1 2 | sed 's/^/empty kernel: /' | tee -a $OUT/lane.txt
done
echo "total $((SECONDS - T0))s"
