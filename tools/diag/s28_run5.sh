#!/usr/bin/env bash
# Session 28, call 5: at the wheel with semi.py's capture rules (a weight that requires grad is
# compressed inside the graph; a frozen one's cached form is held for the graph, with a warning once
# it changes): every semi CUDA test, the bsr capture / bias tests, and the replay cost of a captured
# frozen vs trained 2:4 layer (tools/diag/semi_capture_cost.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 300) python3 -m pytest $R/tests/python/test_semi.py -q -p no:cacheprovider -m cuda > $OUT/semi_tests.txt 2>&1
echo "semi cuda tests: $(tail -1 $OUT/semi_tests.txt)"; grep -E "^FAILED|^ERROR|^E " $OUT/semi_tests.txt | head -8
diag_bsr_cuda_tests 420 "capture or concurrent or bias or workspace"
timeout $(cap 520) python3 $R/tools/diag/semi_capture_cost.py 2>&1 | grep -v -i warn | tee $OUT/semi_capture_cost.txt
echo "total $((SECONDS - T0))s"
