#!/usr/bin/env bash
# Session 28, call 1: where the BERT-base 3072 → 768 (and 768 → 3072) b = 128 d = 0.1 backward's
# device time goes (tools/diag/bsr_bwd_parts.py: parts alone, captured backward both ways, kernel
# timeline of one replay), ncu of its input-gradient dds and weight-gradient sdd, and the CPU GEMM /
# bsr CPU tests on this machine's CPU (session 27's CPU-only commits, first run off the dev machine).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
lscpu | grep -E "Model name|Flags" | cut -c1-120
timeout $(cap 200) python3 $R/tools/diag/bsr_bwd_parts.py bf16:3072:768:128:0.1 bf16:768:3072:128:0.1 bf16:3072:768:128:0.5 2>&1 | grep -v Warn | tee $OUT/bwd_parts.txt
for w in dx dw; do
  timeout $(cap 330) ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --kernel-name regex:"dds_kernel|sdd|Sdd" --launch-skip 3 --launch-count 1 python3 $R/tools/diag/bsr_one_bwd_kernel.py $w > $OUT/ncu_$w.txt 2>&1
  echo "== ncu $w"; grep -E "Function Name|  [a-z_:]*kernel|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Achieved Occupancy|Grid Size|Warp Cycles Per Issued|Mem Busy|Max Bandwidth|L2 Hit" $OUT/ncu_$w.txt | sed 's/  */ /g' | cut -c1-160 | head -20
done
cd $R && timeout $(cap 420) python3 -m pytest tests/python/test_cpu_gemm.py tests/python/test_bsr.py -q -p no:cacheprovider -m "not cuda" -x 2>&1 | tail -3
echo "total $((SECONDS - T0))s"
