#!/usr/bin/env bash
# Session 20, call 8 (wheel of 4f73d1e: the bsr environment switches share one
# parser): the bsr CUDA tests that run each switch in a fresh process (malformed values included),
# the tf32 sdd / linear tests, and the natural-split kron tests, at the final tree.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 400 "each or tf32 or workspace"
timeout $(cap 500) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "natural or head" > $OUT/kron_tests.txt 2>&1
echo "kron natural/head cuda tests: $(tail -1 $OUT/kron_tests.txt)"
echo "total $((SECONDS - T0))s"
