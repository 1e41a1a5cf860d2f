#!/usr/bin/env bash
# Session 34, call 6 (88981d7's wheel): the small-factor backward at 1024 × (8)^4 and (16)^3 under
# ncu's SourceCounters (the CSVs come back for offline reading: per-opcode mix, instructions run
# with every thread predicated off, per-region counts) and its occupancy / scheduler sections.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
for c in "8,8,8,8" "16,16,16"; do
  diag_ncu_kron_bwd_src 200 1024 $c
  timeout $(cap 300) ncu --section SpeedOfLight --section Occupancy --section SchedulerStats --section LaunchStats \
    --kernel-name regex:kron_small_bwd --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_bwd_one.py 1024 $c \
    > $OUT/sec_bwd_${c//,/x}.txt 2>&1
  grep -E "Duration|Issue Slots Busy|Achieved Occupancy|Registers Per|Eligible|Grid Size|Theoretical Occ|Block Limit" \
    $OUT/sec_bwd_${c//,/x}.txt | sed 's/  */ /g' | cut -c1-150
done
gzip -q $OUT/*.csv
echo "total $((SECONDS - T0))s"
