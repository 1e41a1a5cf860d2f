#!/usr/bin/env bash
# Session 29, call 3: every CUDA test at the wheel of d893302 (the library's size, overlap and
# alias checks now run before every CUDA call too), with the edge-case test files run whole.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
diag_all_cuda_tests 560
timeout $(cap 560) python3 -m pytest $T/test_api_edges.py $T/test_bsr_edges.py $T/test_bindings.py -q -p no:cacheprovider \
  > $OUT/edges_tests.txt 2>&1 &
wait
diag_all_cuda_tests_report
echo "edges_tests: $(tail -1 $OUT/edges_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/edges_tests.txt | head -8
echo "total $((SECONDS - T0))s"
