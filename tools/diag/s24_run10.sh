#!/usr/bin/env bash
# Session 24, call 10: the natural split's head leaves its ∂ℓ/∂F pass's reduction to the tail's
# launch (one reduction launch for both; .whl312) against a separate one (the wheel of 508ded9,
# .whl312_old), interleaved twice (tools/diag/kron_natural_parts.py); then every kron CUDA test and
# memcheck of the natural-split tests with the new wheel.
source "$(dirname "$0")/lib.sh"
parts() {
  (cd $R/tools/diag && timeout $(cap 200) python3 kron_natural_parts.py "128 32,32,32" "256 16,16,16,16" 2>&1 \
    | grep -v "Warning\|_warn_once" | tee -a $OUT/natural_parts.txt | cut -c1-300)
}
diag_ab_wheels parts
diag_kron_cuda_tests 300
timeout $(cap 420) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_kron.py -q \
  -p no:cacheprovider -m cuda -k "natural" > $OUT/san_natural.txt 2>&1
echo "memcheck (natural): $(grep -E 'ERROR SUMMARY' $OUT/san_natural.txt | tail -1) | $(tail -1 $OUT/san_natural.txt)"
echo "total $((SECONDS - T0))s"
