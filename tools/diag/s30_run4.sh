#!/usr/bin/env bash
# Session 30, call 6 (call 5 ran it at d69c6d4: torch 2.11 refused that commit's Autograd kernels at import): every CUDA test again at the wheel of 67cf83b (no CUDA source changed since;
# e0f5e89 changed CPU kernels only), with this tree's whole Python package at 61a6f90 over the
# wheel's (traced() routing, version_of, csr's stream events, export recording the in-place ops functionally,
# rms_norm's default eps, BlockSparseLinear's per-call index check, the patchers), and the
# CPU-level edge-case files against the CUDA build.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_copy_package
T=$R/tests/python
diag_all_cuda_tests 540 test_module_edges.py
diag_pytest edges_tests 540 $T/test_api_edges.py $T/test_module_edges.py $T/test_bsr_edges.py &
wait
diag_all_cuda_tests_report
diag_pytest_report edges_tests
echo "total $((SECONDS - T0))s"
