#!/usr/bin/env bash
# Session 16, call 6: every CUDA test of every family on the wheel of call 5 (the bsr tests were cut
# by the time cap there), then the grouped dds A/B of the kept candidate (s7) against the committed
# kernel and two variants (s8: no column offsets in shared memory; s9: consumer 1 one step behind
# consumer 0), with d = 0.05 added.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 330) python3 -m pytest $R/tests/python -q -p no:cacheprovider -m cuda > $OUT/cuda_tests.txt 2>&1
echo "all cuda tests: $(tail -1 $OUT/cuda_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/cuda_tests.txt | head -5
cd $R
BINS="gdds_trace_base gdds_trace_s7 gdds_trace_s8 gdds_trace_s9" \
SHAPES="8192 4096 4096 128 0.05 2;8192 4096 4096 128 0.1 2;8192 4096 4096 128 0.25 2;8192 4096 4096 64 0.1 2;8192 4096 4096 64 0.25 2" \
  timeout $(cap 560) bash tools/diag/s16_run4.sh | grep -v samples
echo "total $((SECONDS - T0))s after install"
