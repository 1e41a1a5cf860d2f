#!/usr/bin/env bash
# Session 14, closing check on the GPU at the final state (wheel of tools/build_device_wheel.sh):
# every CUDA test of every family, the README's main job on the GPU (`sparsekern check` and the
# quick bench).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 330) python3 -m pytest $R/tests/python -q -p no:cacheprovider -m cuda > $OUT/cuda_tests.txt 2>&1
echo "all cuda tests: $(tail -1 $OUT/cuda_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/cuda_tests.txt | head -5
timeout $(cap 460) sparsekern check --device cuda > $OUT/check.txt 2>&1; echo "check exit $?: $(tail -2 $OUT/check.txt | tr '\n' ' ')"
timeout $(cap 540) sparsekern bench --device cuda > $OUT/bench_quick.txt 2>&1; echo "quick bench exit $?"
echo "total $((SECONDS - T0))s after install"
