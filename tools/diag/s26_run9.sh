#!/usr/bin/env bash
# Session 26, call 9: after call 8 (whose four test processes ran out of time with 163 tests left,
# and whose new test had a wrong device index), the concurrent-gradient tests again, those of
# call 8's untested ones that touch the layer or dds backward (tools/diag/s26_rest_ids.txt; the
# sdd / dsd kernel tests it leaves out do not run the changed code and passed in call 1), and the
# issue-3 target bench with stk at this wheel.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_stk
T=$R/tests/python
timeout $(cap 200) python3 -m pytest -q -p no:cacheprovider $(sed "s|^tests/|$R/tests/|" $R/tools/diag/s26_rest_ids.txt) > $OUT/rest.txt 2>&1 &
timeout $(cap 200) python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -k "concurrent or cuda_graph_capture" > $OUT/conc.txt 2>&1 &
wait
echo "rest: $(tail -1 $OUT/rest.txt)"; grep -E "^FAILED|^ERROR" $OUT/rest.txt | head -5
echo "concurrent + capture: $(tail -1 $OUT/conc.txt)"; grep -E "^FAILED|^ERROR" $OUT/conc.txt | head -5
diag_bsr_bench 580
head -3 $OUT/bsr_summary.txt; tail -4 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s"
