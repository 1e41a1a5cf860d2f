#!/usr/bin/env bash
# Session 30, call 4 (two GPUs): test_multi_gpu.py at the wheel of 67cf83b with this tree's whole
# Python package (csr's cached tensors now carry an event of the stream that made them: operands
# on cuda:1 while cuda:0 is current, and the reverse), and the CSR tests of cross-stream use.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_copy_package
nvidia-smi -L
T=$R/tests/python
diag_pytest multi_gpu 300 $T/test_multi_gpu.py
diag_pytest_report multi_gpu
diag_pytest csr_streams 400 $T/test_csr.py -m cuda -k "stream or compile or graph"
diag_pytest_report csr_streams
echo "total $((SECONDS - T0))s"
