#!/usr/bin/env bash
# Session 24, call 3: the staged head-gradient pass with five stages for 32 × 32 heads (four items
# ahead; .whl312) against three (the wheel of 8e800ae, .whl312_old), interleaved twice: the parts of
# the natural split's backward (tools/diag/kron_natural_parts.py, kernel names in full) at
# 128 and 512 × (32,32,32) and 128 × (32,16,16,16); then the head tests with the new wheel.
source "$(dirname "$0")/lib.sh"
parts() {
  (cd $R/tools/diag && timeout $(cap 500) python3 kron_natural_parts.py "128 32,32,32" "512 32,32,32" "128 32,16,16,16" 2>&1 \
    | grep -v "Warning\|_warn_once" | tee -a $OUT/natural_parts.txt | cut -c1-900)
}
diag_ab_wheels parts
timeout $(cap 580) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "natural" 2>&1 | tail -1
echo "total $((SECONDS - T0))s"
