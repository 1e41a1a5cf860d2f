#!/usr/bin/env bash
# Session 31, call 4: every CUDA test at the final wheel (kron's selection epoch, bsr::sdd without
# values, the GIL-free bindings), the new C++-audit kron test among them.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_all_cuda_tests 560 test_tensor_boundary.py
wait
diag_all_cuda_tests_report
grep -E "selection_change" $OUT/kron_tests.txt | head -3
echo "total $((SECONDS - T0))s"
