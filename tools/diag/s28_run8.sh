#!/usr/bin/env bash
# Session 28, call 8: tests/python/test_capture.py (every family captured with warm-up and capture on
# different streams, replayed on new inputs against float64) at this tree's Python package over the
# carried wheel's library.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
SP=$(python3 -c "import sparsekern, os; print(os.path.dirname(sparsekern.__file__))")
cp $R/python/sparsekern/*.py $SP/
timeout $(cap 300) python3 -m pytest $R/tests/python/test_capture.py -q -p no:cacheprovider -m cuda -x > $OUT/capture_tests.txt 2>&1
echo "capture tests: $(tail -1 $OUT/capture_tests.txt)"; grep -E "^FAILED|^ERROR|^E  " $OUT/capture_tests.txt | head -12
echo "total $((SECONDS - T0))s"
