#!/usr/bin/env bash
# Session 20, call 3 (wheel with the conflict-free tf32 fragment loads and the sdd copying operands
# for wgmma only at b = 128 from nnz b^2 / (m + n) = 400): the issue-3 target bench (stk 0.7.1 side
# by side), then the bsr CUDA tests that call 2's time limit cut (collected in order, from the 148th:
# that half did not start, pytest was handed rootdir-relative ids from /tmp; s20_run4.sh runs it).
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
diag_bsr_bench 470
tail -45 $OUT/bsr_summary.txt
timeout $(cap 500) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" > /tmp/ids.txt
echo "collected $(wc -l < /tmp/ids.txt) bsr cuda tests; running 148 onwards"
tail -n +148 /tmp/ids.txt > /tmp/rest.txt
timeout $(cap 590) python3 -m pytest -q -p no:cacheprovider -m cuda $(cat /tmp/rest.txt) > $OUT/bsr_tests_rest.txt 2>&1
echo "bsr cuda tests 148+: $(tail -1 $OUT/bsr_tests_rest.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests_rest.txt | head -5
echo "total $((SECONDS - T0))s"
