#!/usr/bin/env bash
# Session 25, call 5: call 4 showed the reduce-overhead failures were not the capture itself but
# CUDA-graph trees' warm-up, which routes the thread's allocations to the graph pool; the
# per-stream caches now allocate through a helper thread (_core.persistent_buffer). The capture and
# reduce-overhead tests, then every dense and kron CUDA test and the bsr layer tests.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_cuda_tests 200 capture_tests "cuda_graph or reduce_overhead" test_dense.py test_kron.py test_bsr.py
timeout $(cap 330) python3 -m pytest $R/tests/python/test_dense.py $R/tests/python/test_kron.py $R/tests/python/test_inplace.py -q -p no:cacheprovider -m cuda > $OUT/dk_tests.txt 2>&1 &
timeout $(cap 330) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "linear or bias or capture or graph or stream" > $OUT/bsr_tests.txt 2>&1 &
wait
echo "dense/kron/inplace: $(tail -1 $OUT/dk_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/dk_tests.txt | head -5
echo "bsr subset: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests.txt | head -5
echo "total $((SECONDS - T0))s"
