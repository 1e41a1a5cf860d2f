#!/usr/bin/env bash
# Session 15, call 6 (H100, wheel of 9fc807d): (1) issue 5: how close a pure copy of each case's
# bytes comes to the roofline (tools/diag/kron_floor.py); (2) issue 3: ncu of the grouped dds at
# bf16 b = 128 d = 0.25 (the cell at E 0.67 where 0.75 is asked) next to cuBLAS's dense kernel of
# F.linear at the same shape: throughput, tensor-pipe use, warp stalls.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 60) python3 $R/tools/diag/kron_floor.py 2>&1 | tee $OUT/kron_floor.txt
cat > /tmp/dense.py <<'PY'
import torch, torch.nn.functional as F
x = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16); b = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
for _ in range(3): F.linear(x, w, b)
torch.cuda.synchronize()
PY
SECS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats"
timeout $(cap 200) ncu --kernel-name regex:dds_kernel --launch-skip 2 --launch-count 1 $SECS python3 $R/tools/diag/bsr_one.py 128 0.25 bfloat16 > $OUT/ncu_gdds128.txt 2>&1; echo "ncu gdds exit $?"
timeout $(cap 300) ncu --kernel-name regex:"gemm|sm90|cutlass|xmma" --launch-skip 2 --launch-count 1 $SECS python3 /tmp/dense.py > $OUT/ncu_dense.txt 2>&1; echo "ncu dense exit $?"
for f in $OUT/ncu_gdds128.txt $OUT/ncu_dense.txt; do
  echo "== $f"; grep -E "^  [a-z_]|Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|Stall|Achieved Occupancy|Registers Per|Grid Size|Block Size|Tensor|L2 Hit|Mem Busy|Max Bandwidth" $f | sed 's/  */ /g' | cut -c1-160 | head -40
done
echo "total $((SECONDS - T0))s after install"
