#!/usr/bin/env bash
# Session 25, call 10: kron's create_graph backward through the step-wise torch ops (the native
# backward op has no autograd formula): every kron CUDA test (test_double_backward included) and
# the autocast tests.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 200) python3 -m pytest $R/tests/python/test_kron.py $R/tests/python/test_autocast.py -q -p no:cacheprovider -m cuda > $OUT/kron_tests.txt 2>&1
echo "kron + autocast cuda tests: $(tail -1 $OUT/kron_tests.txt)"
grep -E "^FAILED|^ERROR" $OUT/kron_tests.txt | head -5
echo "total $((SECONDS - T0))s"
