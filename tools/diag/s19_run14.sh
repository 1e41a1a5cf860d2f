#!/usr/bin/env bash
# Session 19, call 14 (wheel of 4f5abf9): what bounds the tf32 SM80 sdd (a tf32 weight gradient at
# 8192 x 4096 -> 4096, b = 64 and 32, d = 0.1; grouping its tiles to cut L2 traffic was slower), and
# the grouped 16-bit b = 32 sdd next to it: ncu sections and the stall-sampled SASS lines.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
ncu_sdd() {
  local f=$OUT/ncu_sdd_$1_$2_$3
  SPARSEKERN_BSR_SDD_DENSE=0 timeout $(cap $4) ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis_Tables --section LaunchStats --section InstructionStats --kernel-name regex:sdd --launch-skip 2 --launch-count 1 python3 $R/tools/diag/bsr_sdd_one.py $1 $2 $3 > $f.txt 2>&1
  echo "== sdd b=$1 d=$2 $3"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|One or More Eligible|Bank|bank|Grid Size|Block Size|Shared Memory Configuration Size|Theoretical Occupancy|Stall" $f.txt | sed 's/  */ /g' | cut -c1-200 | head -24
  SPARSEKERN_BSR_SDD_DENSE=0 timeout $(cap $4) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:sdd --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass python3 $R/tools/diag/bsr_sdd_one.py $1 $2 $3 > $f.src.csv 2>/dev/null
  python3 $R/tools/diag/ncu_stalls.py $f.src.csv 10 | cut -c1-180
}
ncu_sdd 64 0.1 tf32 200
ncu_sdd 32 0.1 tf32 380
ncu_sdd 32 0.1 bfloat16 560
echo "total $((SECONDS - T0))s after install"
