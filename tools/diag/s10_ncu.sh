#!/usr/bin/env bash
# Session 10: ncu of the small-factor forward after its vector paths (where the rest of its time goes).
source "$(dirname "$0")/lib.sh"
diag_begin
for c in "1024 8,8,8,8 small" "1024 16,16,16 small"; do
  set -- $c
  f=$OUT/ncu_small_$1_${2//,/x}
  timeout $(cap 200) ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section LaunchStats --kernel-name regex:kron_small --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_fwd_one.py $1 $2 $3 > $f.txt 2>&1
  echo "== $c"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit|Issue Slots Busy|Achieved Occupancy|Warp Cycles Per Issued|One or More Eligible|Executed Ipc A|Bank|bank" $f.txt | sed 's/  */ /g' | cut -c1-200 | head -14
  timeout $(cap 300) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:kron_small --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass python3 $R/tools/diag/kron_fwd_one.py $1 $2 $3 > $f.src.csv 2>/dev/null
  python3 $R/tools/diag/ncu_stalls.py $f.src.csv 8 | cut -c1-180
done
echo "total $((SECONDS - T0))s after build"
