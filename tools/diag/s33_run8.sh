#!/usr/bin/env bash
# Session 33, call 8 (d3a9965's wheel: the kernels of the session's last commits): every kron CUDA
# test, and `sparsekern check` on the GPU (the main job's check of every op).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 400) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda > $OUT/kron_tests.txt 2>&1
echo "kron cuda tests: $(tail -1 $OUT/kron_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/kron_tests.txt | head -8
timeout $(cap 560) python3 -m sparsekern.cli check > $OUT/check.txt 2>&1
echo "sparsekern check exit $?: $(tail -2 $OUT/check.txt | tr '\n' ' ')"
grep -iE "fail" $OUT/check.txt | head -5
echo "total $((SECONDS - T0))s"
