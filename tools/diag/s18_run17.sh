#!/usr/bin/env bash
# Session 18, call 17: the backward plans reserve the head pass's 1024 partials only where the pass
# can run (fp32 heads of p·q ≤ 256): the kron CUDA tests, memcheck of the head pass, and the
# natural-split cases' times.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 150
timeout $(cap 250) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_head_grad_check.py > /tmp/san_h.txt 2>&1
echo "memcheck head pass exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san_h.txt) $(grep -E 'cases' /tmp/san_h.txt)"
timeout $(cap 330) python3 $R/tools/diag/kron_fwd_times.py "128 32,32,32" "256 16,16,16,16" "256 8,8,8,8,8" --save
echo "total $((SECONDS - T0))s after install"
