#!/usr/bin/env bash
# Session 9, third call (issue 3): the bsr CUDA tests in full (each kernel x schedule), the issue-3
# target bench with stk side by side (JSON + summary), and ncu sections of the one-column dds at
# bf16 b = 128 d = 0.1 (the low-density cell, memory/latency-bound). Summary lines last.
source "$(dirname "$0")/lib.sh"
diag_begin
python3 -m pip install --no-deps --no-index -q $R/.whl/stanford_stk-*.whl > /tmp/stk_install.txt 2>&1 || tail -3 /tmp/stk_install.txt
T=$R/tests/python
timeout $(cap 200) python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda > $OUT/bsr_tests.txt 2>&1
echo "bsr cuda tests: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED" $OUT/bsr_tests.txt | head -5
SPARSEKERN_BENCH_BSR=targets timeout $(cap 440) python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > /tmp/bsr_bench.txt 2> $OUT/bsr_bench_rows.txt
echo "bsr bench exit $?"
python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1
grep -E "ERROR" $OUT/bsr_bench_rows.txt | cut -c1-200 | head -4
S="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats"
timeout $(cap 540) ncu $S --kernel-name regex:dds_kernel --launch-skip 2 --launch-count 1 python3 $R/tools/diag/bsr_one.py 128 0.1 bfloat16 > $OUT/ncu_dds_128_01.txt 2>&1
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit|Issue Slots|Warp Cycles Per Issued|Stall|No Eligible|L1/TEX Hit|Mem Busy|Max Bandwidth" $OUT/ncu_dds_128_01.txt | sed 's/  */ /g' | cut -c1-200 | head -24
grep -E "8192x4096" $OUT/bsr_summary.txt | cut -c1-130
tail -1 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after build"
