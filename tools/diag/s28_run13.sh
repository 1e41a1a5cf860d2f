#!/usr/bin/env bash
# Session 28, call 13: the wheel with the binding fixes (held optional arrays, broadcast / overlap
# checks, validate_pattern's companion checks): tests/python/test_bindings.py here, and the CUDA
# tests of the families whose bindings changed (inplace, dense, csr, semi; bsr's layer, capture,
# bias, bad-input and sdd subsets; kron's capture and bad-input tests).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R
timeout $(cap 60) python3 -m pytest tests/python/test_bindings.py -q -p no:cacheprovider 2>&1 | tail -1
for f in test_inplace test_dense test_csr test_semi; do
  timeout $(cap 330) python3 -m pytest tests/python/$f.py -q -p no:cacheprovider -m cuda > $OUT/$f.txt 2>&1
  echo "$f: $(tail -1 $OUT/$f.txt)"; grep -E "^FAILED|^ERROR" $OUT/$f.txt | head -5
done
timeout $(cap 450) python3 -m pytest tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "linear or capture or bias or bad or valid or empty or sdd_row or state_dict" > $OUT/bsr.txt 2>&1
echo "bsr subset: $(tail -1 $OUT/bsr.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr.txt | head -5
timeout $(cap 500) python3 -m pytest tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "capture or bad or graph" 2>&1 | tail -1
echo "total $((SECONDS - T0))s"
