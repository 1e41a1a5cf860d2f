#!/usr/bin/env bash
# Session 34, call 8: every CUDA test at the final wheel (db182db: the small backward's residency
# rule, the 8-byte final-pass stores, CPU ops following torch's thread count), the CPU-thread tests
# on this 16-core machine, then `sparsekern check` on the GPU.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
diag_all_cuda_tests 420 test_tensor_boundary.py
timeout $(cap 420) python3 -m pytest $T/test_cpu_gemm.py -q -p no:cacheprovider -k threads > $OUT/threads_tests.txt 2>&1 &
wait
diag_all_cuda_tests_report
echo "threads_tests: $(tail -1 $OUT/threads_tests.txt)"; grep -E "^FAILED|^E " $OUT/threads_tests.txt | head -5
diag_check 560
echo "total $((SECONDS - T0))s"
