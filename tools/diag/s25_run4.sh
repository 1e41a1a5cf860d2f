#!/usr/bin/env bash
# Session 25, call 4: the per-stream cuBLAS workspace and bsr tile counter no longer cached from
# inside a CUDA-graph capture (python/sparsekern/_core.py). The capture and
# torch.compile(mode="reduce-overhead") tests of dense, kron and bsr first; then every CUDA test of
# dense, inplace, csr, semi and kron in one process and of bsr in two (the halves of the collected
# ids side by side on the one GPU).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_cuda_tests 200 capture_tests "cuda_graph or reduce_overhead" test_dense.py test_kron.py test_bsr.py
diag_bsr_halves_start 580
timeout $(cap 580) python3 -m pytest $R/tests/python/test_dense.py $R/tests/python/test_inplace.py $R/tests/python/test_csr.py \
  $R/tests/python/test_semi.py $R/tests/python/test_kron.py $R/tests/python/test_dlpack_interop.py $R/tests/python/test_integrations_bert.py -q -p no:cacheprovider -m cuda > $OUT/other_tests.txt 2>&1 &
wait
diag_bsr_halves_report
echo "dense/inplace/csr/semi/kron: $(tail -1 $OUT/other_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/other_tests.txt | head -5
echo "total $((SECONDS - T0))s"
