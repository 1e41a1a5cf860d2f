#!/usr/bin/env bash
# Session 25, call 8 (two GPUs, nvidia-h100-x2): tests/python/test_multi_gpu.py, every op family
# with its operands on cuda:1 while cuda:0 is current and the reverse, at 5219d12's wheel.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
nvidia-smi --query-gpu=index,name --format=csv
timeout $(cap 250) python3 -m pytest $R/tests/python/test_multi_gpu.py -q -p no:cacheprovider -x -rs > $OUT/multi_gpu.txt 2>&1
echo "multi-gpu tests: $(tail -1 $OUT/multi_gpu.txt)"
grep -E "^FAILED|^E  |SKIPPED" $OUT/multi_gpu.txt | head -20
echo "total $((SECONDS - T0))s"
