#!/usr/bin/env bash
# Session 24, call 13 (review: the staged head pass's geometry in kron_internal.h, t0_bytes through
# align256; the kernel's code as measured): every kron CUDA test, memcheck of the head-gradient and
# natural-split tests, and the natural split's parts at 128 x (32,32,32).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 120
timeout $(cap 200) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_kron.py -q \
  -p no:cacheprovider -m cuda -k "head_gradient or natural_split_backward" > $OUT/san.txt 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY' $OUT/san.txt | tail -1) | $(tail -1 $OUT/san.txt)"
(cd $R/tools/diag && timeout $(cap 240) python3 kron_natural_parts.py "128 32,32,32" 2>&1 | grep -v "Warning\|_warn_once" | cut -c1-200)
echo "total $((SECONDS - T0))s"
