#!/usr/bin/env bash
# Session 25, call 7: semi's caches skip what is built inside a capture; the semi reduce-overhead
# test, and tools/diag/semi_reduce_overhead.py (the tree's allocation history) if it fails; every
# semi CUDA test.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
timeout $(cap 120) python3 -m pytest $T/test_semi.py -q -p no:cacheprovider -m cuda -k "reduce_overhead" > $OUT/semi_ro.txt 2>&1
echo "semi reduce-overhead: $(tail -1 $OUT/semi_ro.txt)"
grep -q "1 passed" $OUT/semi_ro.txt || (cd $R/tools/diag && timeout $(cap 220) python3 semi_reduce_overhead.py 2>&1 | grep -v "Warning\|warn" | tee $OUT/semi_history.txt | head -120)
timeout $(cap 330) python3 -m pytest $T/test_semi.py $T/test_csr.py -q -p no:cacheprovider -m cuda > $OUT/semi_tests.txt 2>&1
echo "semi/csr: $(tail -1 $OUT/semi_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/semi_tests.txt | head -5
echo "total $((SECONDS - T0))s"
