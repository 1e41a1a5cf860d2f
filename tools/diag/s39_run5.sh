#!/usr/bin/env bash
# Session 39, call 5: the bsr CUDA tests that call 4's first half did not reach before its cap (it
# passed its first 161 beside four other test processes): ids 162 … h of the collected list, alone.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
n=$(wc -l < /tmp/ids.txt); h=$(( (n + 1) / 2 ))
sed -n "162,${h}p" /tmp/ids.txt > /tmp/rest.txt
echo "$n bsr cuda tests; running ids 162-$h ($(wc -l < /tmp/rest.txt))"
timeout $(cap 330) python3 -m pytest -q -p no:cacheprovider $(cat /tmp/rest.txt) > $OUT/bsr_rest.txt 2>&1
echo "bsr rest: $(tail -1 $OUT/bsr_rest.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_rest.txt | head -5
echo "total $((SECONDS - T0))s"
