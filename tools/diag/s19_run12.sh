#!/usr/bin/env bash
# Session 19, call 12 (wheel of 4f5abf9, the session's final kernels): every
# CUDA test of every family at the session's final state.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 570) python3 -m pytest $R/tests/python -q -p no:cacheprovider -m cuda > $OUT/cuda_tests.txt 2>&1
echo "all cuda tests: $(tail -1 $OUT/cuda_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/cuda_tests.txt | head -5
echo "total $((SECONDS - T0))s after install"
