#!/usr/bin/env bash
# Session 25, call 6: csr.py's plans / index copies and semi.py's compressed weights / plan
# workspaces made outside CUDA-graph pools too (_core.outside_graph_pools). Every capture and
# reduce-overhead test (dense, kron, bsr, csr, semi); then every CUDA test of csr, semi, dense and
# inplace, and the bsr layer tests, side by side.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
timeout $(cap 200) python3 -m pytest $T/test_dense.py $T/test_kron.py $T/test_bsr.py $T/test_csr.py $T/test_semi.py \
  -q -p no:cacheprovider -m cuda -k "cuda_graph or reduce_overhead" > $OUT/capture_tests.txt 2>&1
echo "capture/compile tests: $(tail -1 $OUT/capture_tests.txt)"
grep -E "^FAILED|^E  " $OUT/capture_tests.txt | head -10
timeout $(cap 420) python3 -m pytest $T/test_csr.py $T/test_semi.py $T/test_dense.py $T/test_inplace.py -q -p no:cacheprovider -m cuda > $OUT/other_tests.txt 2>&1 &
timeout $(cap 420) python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -k "linear or bias or capture or graph or stream" > $OUT/bsr_tests.txt 2>&1 &
wait
echo "csr/semi/dense/inplace: $(tail -1 $OUT/other_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/other_tests.txt | head -5
echo "bsr subset: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests.txt | head -5
echo "total $((SECONDS - T0))s"
