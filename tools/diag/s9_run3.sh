#!/usr/bin/env bash
# Session 9, third call (issue 3): the bsr CUDA tests in full (each kernel x schedule), the issue-3
# target bench with stk side by side (JSON + summary), and ncu sections of the one-column dds at
# bf16 b = 128 d = 0.1 (the low-density cell, memory/latency-bound). Summary lines last.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_stk
diag_bsr_cuda_tests 200
diag_bsr_bench 440
S="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats"
timeout $(cap 540) ncu $S --kernel-name regex:dds_kernel --launch-skip 2 --launch-count 1 python3 $R/tools/diag/bsr_one.py 128 0.1 bfloat16 > $OUT/ncu_dds_128_01.txt 2>&1
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit|Issue Slots|Warp Cycles Per Issued|Stall|No Eligible|L1/TEX Hit|Mem Busy|Max Bandwidth" $OUT/ncu_dds_128_01.txt | sed 's/  */ /g' | cut -c1-200 | head -24
grep -E "8192x4096" $OUT/bsr_summary.txt | cut -c1-130
tail -1 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after build"
