#!/usr/bin/env bash
# Session 21, call 6 (same wheel as call 5): the bsr CUDA tests call 5 did not reach (its time cap
# stopped the first half after 144 passed: from the 145th on), compute-sanitizer
# memcheck of the split-K tests at the final rule, and the split-K A/B (SPARSEKERN_BSR_SDD_SPLIT=0 /
# auto) once more on the final rule.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
N=$(wc -l < /tmp/ids.txt); H=144
echo "collected $N bsr cuda tests; running $((H + 1))-$N"
tail -n +$((H + 1)) /tmp/ids.txt > /tmp/rest.txt
timeout $(cap 400) python3 -m pytest -q -p no:cacheprovider -m cuda $(cat /tmp/rest.txt) > $OUT/bsr_tests_rest.txt 2>&1
echo "bsr cuda tests $((H + 1))-$N: $(tail -1 $OUT/bsr_tests_rest.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests_rest.txt | head -5
for sp in 0 auto; do
  SPARSEKERN_BSR_SDD_SPLIT=$sp timeout $(cap 450) python3 $R/tools/diag/bsr_split_ab.py 2>&1 | grep -v Warn
done
timeout $(cap 590) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "split_k or graph_capture" > $OUT/san_memcheck.txt 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY' $OUT/san_memcheck.txt | tail -1) | $(tail -1 $OUT/san_memcheck.txt)"
echo "total $((SECONDS - T0))s"
