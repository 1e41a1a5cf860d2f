#!/usr/bin/env bash
# Session 28, call 4: do the new capture tests fail without their fixes? The carried wheel has the
# previous semi.py; .s28old/ (untracked, not committed) holds bsr.py before f0444fa. Each test runs
# with the old module copied over the installed one (expected: fails), then with this tree's
# (expected: passes); then every semi CUDA test and the bsr capture tests with this tree's modules.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
SP=$(python3 -c "import sparsekern, os; print(os.path.dirname(sparsekern.__file__))")
run_t() { timeout $(cap $1) python3 -m pytest $R/tests/python/$2 -q -p no:cacheprovider -m cuda -k "$3" 2>&1 | tail -1; }
cp $R/.s28old/semi.py $SP/semi.py; cp $R/.s28old/bsr.py $SP/bsr.py
echo "old semi.py: $(run_t 120 test_semi.py captured_step_sees_weight_updates)"
echo "old bsr.py:  $(run_t 160 test_bsr.py outlive_a_larger_batch)"
cp $R/python/sparsekern/semi.py $SP/semi.py; cp $R/python/sparsekern/bsr.py $SP/bsr.py
echo "new semi.py: $(run_t 200 test_semi.py captured_step_sees_weight_updates)"
echo "new bsr.py:  $(run_t 240 test_bsr.py outlive_a_larger_batch)"
timeout $(cap 420) python3 -m pytest $R/tests/python/test_semi.py -q -p no:cacheprovider -m cuda > $OUT/semi_tests.txt 2>&1
echo "semi cuda tests: $(tail -1 $OUT/semi_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/semi_tests.txt | head -5
echo "total $((SECONDS - T0))s"
