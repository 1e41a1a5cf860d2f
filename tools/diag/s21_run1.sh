#!/usr/bin/env bash
# Session 21, call 1: why the bench's eager forward times of BlockSparseLinear move between ~64 and
# ~100 µs on unchanged kernels. An nvidia-smi log of SM clock, power and throttle reasons every 50 ms
# runs alongside tools/diag/bsr_clock.py (eager / graph / kernel / host time per target cell, each
# phase stamped with its wall-clock start) and the target bench, which now also records CUDA-graph
# device times. Then the new CUDA-graph capture tests of BlockSparseLinear.
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
Q=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$Q --format=csv,noheader > /dev/null 2>&1 || Q=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu
nvidia-smi --query-gpu=$Q --format=csv -lms 50 > $OUT/smi_clock.csv 2>&1 &
SMI=$!
timeout $(cap 120) python3 $R/tools/diag/bsr_clock.py > $OUT/bsr_clock.txt 2>&1
echo "bsr_clock exit $?"; cat $OUT/bsr_clock.txt
timeout $(cap 200) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k graph_capture > $OUT/capture_tests.txt 2>&1
echo "capture tests: $(tail -1 $OUT/capture_tests.txt)"; grep -E "^FAILED|^E  " $OUT/capture_tests.txt | head -8
date +%s.%N > $OUT/bench_start.txt
diag_bsr_bench 585
kill $SMI
cat $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s"
