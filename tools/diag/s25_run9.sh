#!/usr/bin/env bash
# Session 25, call 9: torch.autocast support (the products and layers cast their operands to the
# autocast dtype, as F.linear / torch.matmul do). tests/python/test_autocast.py on CUDA (fp16), the
# reduce-overhead and capture tests again, and the CUDA tests of the changed Python paths.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
timeout $(cap 150) python3 -m pytest $T/test_autocast.py $T/test_dense.py $T/test_kron.py $T/test_bsr.py $T/test_csr.py $T/test_semi.py \
  -q -p no:cacheprovider -m cuda -k "autocast or cuda_graph or reduce_overhead" > $OUT/autocast_tests.txt 2>&1
echo "autocast/capture/compile tests: $(tail -1 $OUT/autocast_tests.txt)"
grep -E "^FAILED|^E  " $OUT/autocast_tests.txt | head -10
timeout $(cap 220) python3 -m pytest $T/test_dense.py $T/test_csr.py $T/test_semi.py -q -p no:cacheprovider -m cuda > $OUT/dcs_tests.txt 2>&1 &
timeout $(cap 220) python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -k "linear or autocast" > $OUT/bsr_tests.txt 2>&1 &
wait
echo "dense/csr/semi: $(tail -1 $OUT/dcs_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/dcs_tests.txt | head -5
echo "bsr linear: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests.txt | head -5
echo "total $((SECONDS - T0))s"
