#!/usr/bin/env bash
# Session 35, call 2 (wheel of 9ed4752: the session-34 kernels): (a) the backward of three-factor
# 16-wide products through the natural split ("new": the two-factor register-tile backward over
# M · 16 rows plus the head's GEMMs) against the small-factor backward ("small", the default),
# alternated in one process (kron_bwd_sel_times.py, two rounds); (b) the bsr CUDA tests that session
# 34 left unrun (test_sdd_split_each, test_sdd_split_k_sm80).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
(cd $R/tools/diag && timeout $(cap 200) python3 kron_bwd_sel_times.py "small;new" 2 "1024 16,16,16" "512 16,16,16" \
  "2048 16,16,16" "4096 16,16,16" "1024 16,16,8" "1024 16,8,8" "1024 16,16,32" "256 16,16,16,16")
diag_bsr_cuda_tests 420 "sdd_split_each or sdd_split_k_sm80"
echo "total $((SECONDS - T0))s"
