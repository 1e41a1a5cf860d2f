#!/usr/bin/env bash
# Session 28, calls 6-7: as call 5 (s28_run5.sh), at the wheel where a capture also takes the choice
# timed on another stream (semi.py: _timed_on_another_stream): every semi CUDA test, the bsr
# capture / bias tests, and the replay cost of a captured 2:4 layer (tools/diag/semi_capture_cost.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 300) python3 -m pytest $R/tests/python/test_semi.py -q -p no:cacheprovider -m cuda > $OUT/semi_tests.txt 2>&1
echo "semi cuda tests: $(tail -1 $OUT/semi_tests.txt)"; grep -E "^FAILED|^ERROR|^E " $OUT/semi_tests.txt | head -8
diag_bsr_cuda_tests 420 "capture or concurrent or bias or workspace"
timeout $(cap 520) python3 $R/tools/diag/semi_capture_cost.py 2>&1 | grep -v -i warn | tee $OUT/semi_capture_cost.txt
echo "total $((SECONDS - T0))s"
