#!/usr/bin/env bash
# Session 37, call 5: call 4's PDL A/B again with the small-factor backward triggering the
# reduction's launch at its last phase too (griddepcontrol.launch_dependents); the kron CUDA tests
# and memcheck of the small backward's check script (tools/diag/kron_small_bwd_check.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 150) python3 $R/tools/diag/kron_pdl_ab.py 3 "1024 16,16,16" "1024 8,8,8,8" "256 16,16,16,16" \
  "1024 4,4,4,4,4" "1024 32,32" "16 32,32" "1024 64,64" "128 32,32,32"
diag_kron_cuda_tests 300
timeout $(cap 450) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_small_bwd_check.py > /tmp/san_sb.txt 2>&1
echo "memcheck (small backward) exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san_sb.txt | tail -1); $(grep -c ' ok$' /tmp/san_sb.txt) ok, $(grep -c WRONG /tmp/san_sb.txt) wrong"
echo "total $((SECONDS - T0))s"
