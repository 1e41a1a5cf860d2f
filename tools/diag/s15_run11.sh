#!/usr/bin/env bash
# Session 15, call 11 (final code): the grouped dds with the TMA-store epilogue and the new grouped
# rule (use_grouped). Every CUDA test of every family, then the issue-3 target bench with stk.
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
timeout $(cap 290) python3 -m pytest $R/tests/python -q -p no:cacheprovider -m cuda > $OUT/cuda_tests.txt 2>&1
echo "all cuda tests: $(tail -1 $OUT/cuda_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/cuda_tests.txt | head -5
diag_bsr_bench 590
tail -45 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after install"
