#!/usr/bin/env bash
# Session 25, call 3: the new CUDA-graph capture tests of kron (KronLinear forward + gradients in one
# graph, seven plans) and the torch.compile(mode="reduce-overhead") tests of KronLinear and
# BlockSparseLinear, at 88de286's sources (the wheel of ea94ece: the library is unchanged).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 400) python3 -m pytest $R/tests/python/test_kron.py $R/tests/python/test_bsr.py -q -p no:cacheprovider \
  -m cuda -k "cuda_graph_capture or reduce_overhead" > $OUT/capture_tests.txt 2>&1
echo "capture/compile tests: $(tail -1 $OUT/capture_tests.txt)"
grep -E "^FAILED|Error|error" $OUT/capture_tests.txt | head -20
timeout $(cap 560) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_kron.py -q \
  -p no:cacheprovider -m cuda -k "cuda_graph_capture" > $OUT/san_capture.txt 2>&1
echo "memcheck (kron capture): $(grep -E 'ERROR SUMMARY' $OUT/san_capture.txt | tail -1) | $(tail -1 $OUT/san_capture.txt)"
echo "total $((SECONDS - T0))s"
