#!/usr/bin/env bash
# Session 25, call 1: the register-tile forward with X in slabs along k (kron_fast.h, .whl312)
# against ea94ece's wheel (.whl312_old) on its default plan, interleaved twice; then the slab sweep
# (tools/diag/kron_slabs.py, new wheel), every kron CUDA test, and memcheck of the override tests.
source "$(dirname "$0")/lib.sh"
ab() {
  (cd $R/tools/diag && KRON_SLABS_SELS=auto timeout $(cap 150) python3 kron_slabs.py "1024 64,64" "1024 32,32" \
    "4096 64,64" "128 32,32,32" 2>&1 | grep -v "Warning\|_warn_once" | grep roof | tee -a $OUT/ab.txt)
}
diag_ab_wheels ab
(cd $R/tools/diag && timeout $(cap 300) python3 kron_slabs.py 2>&1 | grep -v "Warning\|_warn_once" | tee $OUT/slabs.txt | cut -c1-400)
diag_kron_cuda_tests 500
timeout $(cap 590) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_kron.py -q \
  -p no:cacheprovider -m cuda -k "fast_overrides and slabs" > $OUT/san_slabs.txt 2>&1
echo "memcheck (slabs): $(grep -E 'ERROR SUMMARY' $OUT/san_slabs.txt | tail -1) | $(tail -1 $OUT/san_slabs.txt)"
echo "total $((SECONDS - T0))s"
