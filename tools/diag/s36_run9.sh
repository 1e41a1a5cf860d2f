#!/usr/bin/env bash
# Session 36, call 9 (the final wheel): every CUDA test file (bsr in two halves, kron, the others
# plus test_module_edges.py (its compiled functional_call cases are new), test_api_edges.py,
# test_bsr_edges.py, test_numerics.py and test_tensor_boundary.py)
# beside `sparsekern check`: the session changed bsr.py's index derivation (scatter_add for
# bincount) under every bsr path, and the kron kernels.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_all_cuda_tests 520 test_module_edges.py test_api_edges.py test_bsr_edges.py test_numerics.py test_tensor_boundary.py
diag_check 520 &
wait
diag_all_cuda_tests_report
echo "total $((SECONDS - T0))s"
