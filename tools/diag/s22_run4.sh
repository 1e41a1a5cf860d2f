#!/usr/bin/env bash
# Session 22, calls 4 and 5: every bsr CUDA test at the final kernels, in two halves of the collected
# ids (HALF=1 or 2), so that each fits a call.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
n=$(wc -l < /tmp/ids.txt); h=$(( (n + 1) / 2 ))
if [ "${HALF:-1}" = 1 ]; then sed -n "1,${h}p" /tmp/ids.txt > /tmp/mine.txt; else sed -n "$((h + 1)),${n}p" /tmp/ids.txt > /tmp/mine.txt; fi
echo "$n cuda tests, this half: $(wc -l < /tmp/mine.txt)"
timeout $(cap 570) python3 -m pytest -q -p no:cacheprovider $(cat /tmp/mine.txt) > $OUT/bsr_tests_half${HALF:-1}.txt 2>&1
echo "half ${HALF:-1}: $(tail -1 $OUT/bsr_tests_half${HALF:-1}.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests_half${HALF:-1}.txt | head -5
echo "total $((SECONDS - T0))s"
