#!/usr/bin/env bash
# Session 10, first call: why the small-factor fused forwards ((1024,[8]^4), (1024,[16]^3)) run at
# ~30 µs against a ~8 µs roofline: ncu of the generic (old) and register-tile (new) kernels, the
# stall-sampled SASS of each, and their device times next to a copy of the same bytes.
source "$(dirname "$0")/lib.sh"
diag_begin
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis --section LaunchStats"
for c in "1024 8,8,8,8 old" "1024 8,8,8,8 new" "1024 16,16,16 old" "1024 16,16,16 new" "1024 32,32 auto" "4096 64,64 auto"; do
  set -- $c
  timeout $(cap 420) python3 $R/tools/diag/kron_fwd_one.py $1 $2 $3 --time
done
for c in "1024 8,8,8,8 old" "1024 8,8,8,8 new" "1024 16,16,16 new"; do
  set -- $c
  f=$OUT/ncu_fwd_$1_${2//,/x}_$3
  timeout $(cap 480) ncu $S --kernel-name regex:kron_ --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_fwd_one.py $1 $2 $3 > $f.txt 2>&1
  echo "== fwd $c"
  grep -E "^  [a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Stall|One or More Eligible|No Eligible|Executed Ipc A|L2 Hit|Theoretical Occ|Block Limit|Bank|bank|Grid Size|Block Size|Dynamic Shared" $f.txt | sed 's/  */ /g' | cut -c1-220 | head -40
  timeout $(cap 540) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:kron_ --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass python3 $R/tools/diag/kron_fwd_one.py $1 $2 $3 > $f.src.csv 2>/dev/null
  python3 $R/tools/diag/ncu_stalls.py $f.src.csv 16 | cut -c1-200
done
echo "total $((SECONDS - T0))s after build"
