#!/usr/bin/env bash
# Session 27, call 1 (wheels: .whl312 = this commit, with the device guard's fix; .whl312_old =
# a59f1bb, without it):
#  1. the fresh-thread script of test_fresh_thread_takes_the_same_kernels at the old wheel: does the
#     test see the SM80 fallback the fix removes?
#  2. at the new wheel: that test, then memcheck over the concurrent-gradient tests in a fresh
#     process, the fork at its default (off) and on (s27_next.sh sanitize), and whether the sanitizer
#     still reports CUDA_ERROR_INVALID_CONTEXT (the autograd thread's first backward);
#  3. the concurrent-gradient tests without the sanitizer.
source "$(dirname "$0")/lib.sh"
diag_old_wheel_and_fresh_script
diag_begin_wheel
T=$R/tests/python
echo "== old wheel (a59f1bb), fresh thread:"
PYTHONPATH=/tmp/oldpkg timeout $(cap 60) python3 /tmp/fresh.py 2>&1 | cut -c1-600
echo "== new wheel, fresh thread:"
timeout $(cap 100) python3 /tmp/fresh.py 2>&1 | cut -c1-600
timeout $(cap 140) python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -k fresh_thread 2>&1 | tail -2
diag_bsr_sanitize 260 memcheck "concurrent or fresh_thread" concurrent_default
grep -m3 -E "Program hit|INVALID_CONTEXT" $OUT/san_concurrent_default.txt
SPARSEKERN_BSR_CONCURRENT_GRADS=1 diag_bsr_sanitize 480 memcheck "concurrent or cuda_graph_capture" concurrent_on
grep -m3 -E "Program hit|INVALID_CONTEXT" $OUT/san_concurrent_on.txt
grep -E "^FAILED|^ERROR|Error" $OUT/san_concurrent_on.txt | head -8
diag_bsr_cuda_tests 560 "concurrent"
echo "total $((SECONDS - T0))s"
