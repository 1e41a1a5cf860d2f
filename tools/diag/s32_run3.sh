#!/usr/bin/env bash
# Session 32, call 3: ncu of the BERT-base 3072 → 768 b = 128 d = 0.1 backward's input gradient
# (grouped dds) and weight gradient (split sdd): throughput, memory tables, occupancy, stalls.
# The carried wheel is session 32's experimental one; SPARSEKERN_BSR_EMPTY_TILES=0 runs HEAD's dds.
# (Call 3 also ran bf16:768:3072:128:0.1: ncu reported no kernel matching the regex within its
# --launch-skip 4 --launch-count 2 there; not looked into, dropped from the script.)
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_copy_package
cd $R/tools/diag
export SPARSEKERN_BSR_EMPTY_TILES=0
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second
for spec in bf16:3072:768:128:0.1; do
  f=$OUT/ncu_${spec//:/_}.txt
  timeout $(cap 400) ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --metrics $M \
    --kernel-name regex:"gdds_kernel|sdd_kernel" --launch-skip 4 --launch-count 2 python3 bsr_bert_ncu.py $spec > $f 2>&1
  echo "== $spec: exit $?"
  grep -E "gdds_kernel|sdd_kernel|Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Achieved Occupancy|dram__bytes|lts__t_sector_hit|lts__t_bytes|Issue Slots Busy|No Eligible|One or More|SM Frequency|Registers Per|Grid Size|Warp Cycles Per Issued" $f | sed 's/  */ /g' | cut -c1-150
done
echo "total $((SECONDS - T0))s"
