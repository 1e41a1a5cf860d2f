#!/usr/bin/env bash
# Session 24, call 5: the staged head-gradient pass for 16 × 16 heads too (32 slices of 128-column
# items, 50.7 KB of dynamic shared memory; .whl312) against the 4 × 4-block pass (the wheel of
# 8e800ae, .whl312_old), interleaved twice (tools/diag/kron_natural_parts.py); then the natural-split
# tests and memcheck of the head-gradient tests with the new wheel.
source "$(dirname "$0")/lib.sh"
parts() {
  (cd $R/tools/diag && timeout $(cap 400) python3 kron_natural_parts.py "256 16,16,16,16" "64 16,16,16,16" "128 32,32,32" 2>&1 \
    | grep -v "Warning\|_warn_once" | tee -a $OUT/natural_parts.txt | cut -c1-700)
}
diag_ab_wheels parts
timeout $(cap 480) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "natural" 2>&1 | tail -1
timeout $(cap 580) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_kron.py -q \
  -p no:cacheprovider -m cuda -k "head_gradient" > $OUT/san_head.txt 2>&1
echo "memcheck (head_gradient): $(grep -E 'ERROR SUMMARY' $OUT/san_head.txt | tail -1) | $(tail -1 $OUT/san_head.txt)"
echo "total $((SECONDS - T0))s"
