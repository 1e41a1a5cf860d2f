#!/usr/bin/env bash
# Session 24, call 2: the natural split's head ∂ℓ/∂F for 16 × 32 … 32 × 32 heads as a staged pass
# (kron_head_f32.cu) and the split's tail keeping its T0 in the forward's saved states. Every kron
# CUDA test, memcheck over the natural-split tests, and the parts of the backward
# (tools/diag/kron_natural_parts.py) at the bench's 128 × (32,32,32) and two more shapes.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 200
timeout $(cap 330) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_kron.py -q \
  -p no:cacheprovider -m cuda -k "natural" > $OUT/san_natural.txt 2>&1
echo "memcheck (natural): $(grep -E 'ERROR SUMMARY' $OUT/san_natural.txt | tail -1) | $(tail -1 $OUT/san_natural.txt)"
cd $R/tools/diag && timeout $(cap 560) python3 kron_natural_parts.py "128 32,32,32" "512 32,32,32" "256 16,16,16,16" \
  "128 32,16,16,16" 2>&1 | tee $OUT/natural_parts.txt | cut -c1-700
echo "total $((SECONDS - T0))s"
