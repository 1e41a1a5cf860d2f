#!/usr/bin/env bash
# Session 37, call 8 (the final wheel, 6e3f258's code): the CUDA test files other than bsr and kron
# (kron's ran at this wheel in calls 5-7; this session changed no bsr code), with test_module_edges,
# test_api_edges, test_numerics and test_tensor_boundary, which call the kron ops too.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
diag_pytest others 400 $T/test_dense.py $T/test_csr.py $T/test_semi.py $T/test_inplace.py $T/test_autocast.py \
  $T/test_dlpack_interop.py $T/test_integrations_bert.py $T/test_cpu_gemm.py $T/test_bindings.py $T/test_capture.py \
  $T/test_module_edges.py $T/test_api_edges.py $T/test_numerics.py $T/test_tensor_boundary.py -m cuda -rs
diag_pytest_report others
echo "total $((SECONDS - T0))s"
