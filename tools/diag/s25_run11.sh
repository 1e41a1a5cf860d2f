#!/usr/bin/env bash
# Session 25, call 11: the CUDA-graph capture tests through sparsekern.testing.capture_graph (the
# scaffolding the kron and bsr tests shared), the patcher test's autocast steps on CUDA, and the
# autocast / reduce-overhead tests once more at the final Python package.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
timeout $(cap 170) python3 -m pytest $T/test_kron.py $T/test_bsr.py $T/test_autocast.py $T/test_dense.py -q -p no:cacheprovider -m cuda -rs \
  -k "cuda_graph or patcher_roberta or autocast or reduce_overhead" > $OUT/final_tests.txt 2>&1
echo "final tests: $(tail -1 $OUT/final_tests.txt)"
grep -E "^FAILED|^E  |SKIPPED" $OUT/final_tests.txt | head -10
echo "total $((SECONDS - T0))s"
