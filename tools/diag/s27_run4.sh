#!/usr/bin/env bash
# Session 27, call 4, on two H100s, at the wheel with the fork of captured backwards on by default
# and capture_graph's capture stream per device (.whl312):
#  1. test_multi_gpu.py (call 3: the new captured-backward test failed on the second GPU, since
#     torch.cuda.graph's default capture stream lives on the first capture's device);
#  2. the bsr tests around captures, the fork, the switch and the fresh thread, and the grouped-edge
#     test whose subprocess ran past its 300 s under call 2's six processes, alone.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
timeout $(cap 200) python3 -m pytest $T/test_multi_gpu.py -q -p no:cacheprovider > $OUT/multi_gpu.txt 2>&1
echo "multi-gpu: $(tail -1 $OUT/multi_gpu.txt)"; grep -E "^FAILED|^ERROR|^E  " $OUT/multi_gpu.txt | head -8 | cut -c1-200
diag_bsr_cuda_tests 420 "concurrent or fresh_thread or capture or compile or grouped_edges_each_kernel"
echo "total $((SECONDS - T0))s"
