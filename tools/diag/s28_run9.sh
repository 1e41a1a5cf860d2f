#!/usr/bin/env bash
# Session 28, call 9: this tree's Python package over the carried wheel's library: every CUDA test
# of the csr, dense, inplace, capture, semi and kron-capture files (the csr / semi capture changes).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
SP=$(python3 -c "import sparsekern, os; print(os.path.dirname(sparsekern.__file__))")
cp $R/python/sparsekern/*.py $SP/
for f in test_csr test_dense test_inplace test_capture test_semi; do
  timeout $(cap 480) python3 -m pytest $R/tests/python/$f.py -q -p no:cacheprovider -m cuda > $OUT/$f.txt 2>&1
  echo "$f: $(tail -1 $OUT/$f.txt)"; grep -E "^FAILED|^ERROR" $OUT/$f.txt | head -5
done
timeout $(cap 540) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "capture or graph" 2>&1 | tail -1
echo "total $((SECONDS - T0))s"
