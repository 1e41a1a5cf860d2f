#!/usr/bin/env bash
# Session 30, call 1: every CUDA test at the wheel of 67cf83b (check.h's span/overlap helpers now
# used by csr, the in-place rows and square_matmul; kron / gemm refuse bad enumerators), with this
# tree's Python package (the audit fixes of 93c177e..8ffc401) over the
# wheel's, and the edge-case test files run whole against the CUDA build; first, the new CSR
# cross-stream test against the previous csr.py.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
SP=$(python3 -c "import sparsekern,os;print(os.path.dirname(sparsekern.__file__))"); cp $R/python/sparsekern/*.py $SP/
T=$R/tests/python
# The new cross-stream CSR test against the csr.py before 1728468 (carried in .s30old/): it should fail there.
cp $R/.s30old/csr.py $SP/csr.py
timeout 90 python3 -m pytest $T/test_csr.py -q -p no:cacheprovider -k cached_pattern_tensors_across_streams > $OUT/csr_streams_old.txt 2>&1
echo "cross-stream test, previous csr.py: $(tail -1 $OUT/csr_streams_old.txt)"; grep -E "^E  " $OUT/csr_streams_old.txt | head -3 | cut -c1-160
cp $R/python/sparsekern/csr.py $SP/csr.py
diag_all_cuda_tests 570
timeout $(cap 570) python3 -m pytest $T/test_api_edges.py $T/test_bsr_edges.py $T/test_module_edges.py -q -p no:cacheprovider > $OUT/edges_tests.txt 2>&1 &
wait
diag_all_cuda_tests_report
echo "edges_tests: $(tail -1 $OUT/edges_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/edges_tests.txt | head -8
echo "total $((SECONDS - T0))s"
