#!/usr/bin/env bash
# Session 28, call 11: do the new graph tests fail without their fixes? .s28old/ (untracked, not
# committed) holds nn.py, csr.py and __init__.py before 2f16efe / 72c800b: each test runs with the
# old module over the installed one (expected: fails), then with this tree's (expected: passes).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
SP=$(python3 -c "import sparsekern, os; print(os.path.dirname(sparsekern.__file__))")
run_t() { timeout $(cap $1) python3 -m pytest $R/tests/python/$2 -q -p no:cacheprovider -m cuda -k "$3" 2>&1 | tail -1; }
cp $R/python/sparsekern/*.py $SP/
cp $R/.s28old/nn.py $SP/nn.py
echo "old nn.py:  $(run_t 60 test_bsr.py survives_load_state_dict)"
cp $R/python/sparsekern/nn.py $SP/nn.py
cp $R/.s28old/csr.py $SP/csr.py; cp $R/.s28old/__init__.py $SP/__init__.py
echo "old csr.py: $(run_t 120 test_capture.py many_sparse_layers)"
cp $R/python/sparsekern/csr.py $SP/csr.py; cp $R/python/sparsekern/__init__.py $SP/__init__.py
echo "new nn.py:  $(run_t 160 test_bsr.py survives_load_state_dict)"
echo "new csr.py: $(run_t 200 test_capture.py many_sparse_layers)"
echo "total $((SECONDS - T0))s"
