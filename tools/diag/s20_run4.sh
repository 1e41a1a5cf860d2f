#!/usr/bin/env bash
# Session 20, call 4 (wheel of 44853e4's tree): the bsr CUDA tests that call 2's time limit cut
# (collected in order, from the 148th; ids are relative to the repository root).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 60) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" > /tmp/ids.txt
echo "collected $(wc -l < /tmp/ids.txt) bsr cuda tests; running 148 onwards"
tail -n +148 /tmp/ids.txt | sed "s|^|$R/|" > /tmp/rest.txt
timeout $(cap 560) python3 -m pytest -q -p no:cacheprovider -m cuda $(cat /tmp/rest.txt) > $OUT/bsr_tests_rest.txt 2>&1
echo "bsr cuda tests 148+: $(tail -1 $OUT/bsr_tests_rest.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests_rest.txt | head -5
echo "total $((SECONDS - T0))s"
