#!/usr/bin/env bash
# Session 31, call 1: every CUDA test at the wheel of this tree (the bindings drop the GIL around
# library calls; the tensor-boundary fixes, BlockSparseLinear's index records and csr's bounded
# plan cache in Python), the edge-case test files run whole against the CUDA build, and eight
# threads calling every family concurrently (tools/diag/s31_threads.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
timeout $(cap 120) python3 $R/tools/diag/s31_threads.py > $OUT/threads.txt 2>&1; cat $OUT/threads.txt | tail -8
diag_all_cuda_tests 560 test_tensor_boundary.py test_numerics.py
timeout $(cap 560) python3 -m pytest $T/test_api_edges.py $T/test_bsr_edges.py $T/test_module_edges.py -q -p no:cacheprovider > $OUT/edges_tests.txt 2>&1 &
wait
diag_all_cuda_tests_report
echo "edges_tests: $(tail -1 $OUT/edges_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/edges_tests.txt | head -8
echo "total $((SECONDS - T0))s"
