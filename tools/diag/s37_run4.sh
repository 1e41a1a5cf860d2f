#!/usr/bin/env bash
# Session 37, call 4: the kron backward's partial-sum reduction as a programmatic dependent launch
# (griddepcontrol; the register-tile backward triggers it at its last phase) against a plain launch,
# SPARSEKERN_KRON_PDL=0/1 alternated in one process; the kron CUDA tests (the new PDL on/off test
# among them), memcheck of the backward's check script, and the capture / PDL tests under memcheck.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 150) python3 $R/tools/diag/kron_pdl_ab.py 3 "1024 64,64" "1024 32,32" "16 32,32" "2048 32,32" \
  "4096 64,64" "1024 16,16,16" "1024 8,8,8,8" "256 16,16,16,16" "128 32,32,32"
diag_kron_cuda_tests 300
timeout $(cap 420) compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest $R/tests/python/test_kron.py -q \
  -p no:cacheprovider -m cuda -k "dependent_launch or cuda_graph_capture" > /tmp/san_pdl.txt 2>&1
echo "memcheck (PDL / capture tests) exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san_pdl.txt | tail -1) $(tail -1 /tmp/san_pdl.txt)"
diag_kron_bwd_sanitize 500 560
echo "total $((SECONDS - T0))s"
