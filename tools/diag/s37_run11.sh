#!/usr/bin/env bash
# Session 37, call 11 (the review commits: the reduction's PDL check from the backend's Limits, one
# rows_vec16 test): every kron CUDA test, the PDL on/off times again, memcheck over the PDL and
# capture tests and the small backward's check script.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 150
timeout $(cap 220) python3 $R/tools/diag/kron_pdl_ab.py 2 "1024 64,64" "1024 32,32" "1024 8,8,8,8"
timeout $(cap 330) compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest $R/tests/python/test_kron.py -q \
  -p no:cacheprovider -m cuda -k "dependent_launch or cuda_graph_capture" > /tmp/san_pdl.txt 2>&1
echo "memcheck (PDL / capture tests) exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san_pdl.txt | tail -1); $(grep -E 'passed|failed' /tmp/san_pdl.txt | tail -1)"
echo "total $((SECONDS - T0))s"
