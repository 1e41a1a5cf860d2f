#!/usr/bin/env bash
# Session 28, call 10: the audit's fixes at this tree's Python package over the carried wheel's
# library (csr: pattern cache by tensor identity, captures hold what they read; nn: derived index
# sets loaded in place; semi: refresh(), release_graph_buffers()): every csr / capture / semi CUDA
# test and the bsr state-dict, capture, concurrent and bias tests.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
SP=$(python3 -c "import sparsekern, os; print(os.path.dirname(sparsekern.__file__))")
cp $R/python/sparsekern/*.py $SP/
for f in test_csr test_capture test_semi; do
  timeout $(cap 300) python3 -m pytest $R/tests/python/$f.py -q -p no:cacheprovider -m cuda > $OUT/$f.txt 2>&1
  echo "$f: $(tail -1 $OUT/$f.txt)"; grep -E "^FAILED|^ERROR|^E  " $OUT/$f.txt | head -6
done
diag_bsr_cuda_tests 400 "state_dict or survives or capture or concurrent or bias or linear"
echo "total $((SECONDS - T0))s"
