#!/usr/bin/env bash
# Session 18, call 1 (wheel of 7d14bd7; kron code as of 31552c5): where the (64 ⊗ 64) register-tile
# forward (57% of the roofline at 4096 rows, 53% at 1024) and its kept-T0 backward (2.59x the
# forward at 1024 rows) spend their issue slots, and the small-factor backward at (8⊗8⊗8⊗8)
# (4.5x its forward): ncu sections and stall-sampled SASS; the sampled csv files come back.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
for c in "1024 64,64" "4096 64,64" "1024 8,8,8,8" "1024 16,16,16" "1024 32,32"; do
  timeout $(cap 60) python3 $R/tools/diag/kron_bwd_kept.py $c --time
done
diag_ncu_kron_fwd 150 4096 64,64 auto "kron_fast"
diag_ncu_kron_fwd 200 1024 64,64 auto "kron_fast"
kron_ncu_bwd_kept() {  # LIMIT BATCH P1,... REGEX: as diag_ncu_kron_bwd, through kron_bwd_kept.py
  local f=$OUT/ncu_bwdkept_$2_${3//,/x}
  timeout $(cap $1) ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section LaunchStats --section InstructionStats --kernel-name regex:$4 --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_bwd_kept.py $2 $3 > $f.txt 2>&1
  echo "== bwd kept $2 $3"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|One or More Eligible|Executed Ipc A|Bank|bank|Grid Size|Block Size" $f.txt | sed 's/  */ /g' | cut -c1-200 | head -24
  timeout $(cap $1) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:$4 --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass python3 $R/tools/diag/kron_bwd_kept.py $2 $3 > $f.src.csv 2>/dev/null
  python3 $R/tools/diag/ncu_stalls.py $f.src.csv 14 | cut -c1-180
}
kron_ncu_bwd_kept 280 1024 64,64 "kron_fast_bwd"
kron_ncu_bwd_kept 360 1024 8,8,8,8 "kron_small_bwd"
echo "total $((SECONDS - T0))s after install"
