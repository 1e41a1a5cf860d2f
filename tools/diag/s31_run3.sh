#!/usr/bin/env bash
# Session 31, call 3: every family on tensors past 2^31 elements (tools/diag/s31_large.py, a
# subprocess per case), and test_tensor_boundary.py again after its torch 2.11 adjustment.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_copy_package
timeout $(cap 420) python3 $R/tools/diag/s31_large.py 2>&1 | tee $OUT/large.txt
diag_pytest boundary 120 $R/tests/python/test_tensor_boundary.py
diag_pytest_report boundary
echo "total $((SECONDS - T0))s"
