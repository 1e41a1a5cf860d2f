#!/usr/bin/env bash
# Session 21, call 5 (wheel with split-K for the 16-bit sm_90a sdd, auto = about one tile per SM):
# the first half of the bsr CUDA tests (collected in file order), then the issue-3 target bench
# with its new device-time columns (stk 0.7.1 side by side). s21_run6.sh runs the second half.
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
N=$(wc -l < /tmp/ids.txt); H=$(( (N + 1) / 2 ))
echo "collected $N bsr cuda tests; running 1-$H"
head -n $H /tmp/ids.txt > /tmp/first.txt
timeout $(cap 250) python3 -m pytest -q -p no:cacheprovider -m cuda $(cat /tmp/first.txt) > $OUT/bsr_tests_first.txt 2>&1
echo "bsr cuda tests 1-$H: $(tail -1 $OUT/bsr_tests_first.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests_first.txt | head -5
diag_bsr_bench 590
cat $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s"
