#!/usr/bin/env bash
# Session 29, call 4: call 3's "other" process ran the whole tests/python folder (diag_all_cuda_tests
# without extra files expanded to the folder itself; fixed) and hit its time cap with the bsr half:
# the other CUDA test files alone at the same wheel (d893302).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
timeout $(cap 280) python3 -m pytest $T/test_dense.py $T/test_csr.py $T/test_semi.py $T/test_inplace.py \
  $T/test_autocast.py $T/test_dlpack_interop.py $T/test_integrations_bert.py $T/test_cpu_gemm.py \
  $T/test_bindings.py $T/test_capture.py -q -p no:cacheprovider -m cuda -x > $OUT/other_tests.txt 2>&1
echo "other_tests: $(tail -1 $OUT/other_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/other_tests.txt | head -8
echo "total $((SECONDS - T0))s"
