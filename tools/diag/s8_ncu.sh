#!/usr/bin/env bash
# Session 8: ncu sections of the register-tile backward kernel (and the forward for comparison).
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis"
for c in "1024 32" "1024 64" "16 32"; do
  set -- $c
  timeout 120 ncu $S --kernel-name regex:kron_fast_bwd --launch-skip 1 --launch-count 1 python3 $R/tools/diag/kron_bwd_fast_ncu.py $1 $2 > $OUT/ncu_bwd_$1_$2.txt 2>&1
  echo "== bwd $1 x [$2,$2]"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Stall|bank|Bank|One or More Eligible|No Eligible|Executed Ipc|L1/TEX Hit|L2 Hit|DRAM Throughput|Theoretical Occ|Block Limit|stalled|conflict|bottleneck" $OUT/ncu_bwd_$1_$2.txt | sed 's/  */ /g' | cut -c1-300 | head -45
done
timeout 100 ncu --section SpeedOfLight --section WarpStateStats --kernel-name regex:kron_fast_kernel --launch-skip 1 --launch-count 1 python3 -c "
import torch, math
from sparsekern import kron_matmul
x = torch.randn(1024, 1024, device='cuda'); fs = [torch.randn(32, 32, device='cuda') for _ in range(2)]
for _ in range(3): kron_matmul(x, fs)
torch.cuda.synchronize()" > $OUT/ncu_fwd_1024_32.txt 2>&1
echo "== fwd 1024 x [32,32]"
grep -E "Duration|Compute \(SM\) Throughput|Issue Slots|Warp Cycles Per Issued|Stall" $OUT/ncu_fwd_1024_32.txt | sed 's/  */ /g' | cut -c1-160 | head -12
