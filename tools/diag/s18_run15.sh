#!/usr/bin/env bash
# Session 18, call 15: the small-factor forward with three X buffers (two tiles in flight) where
# they keep the blocks per SM, against the wheel of ac7d68f (two), interleaved twice; the kron CUDA
# tests; memcheck and racecheck of the small-factor forward (kron_small_check.py, with two cases
# forcing stages=2 and stages=3). Measured slower; the change was not committed.
source "$(dirname "$0")/lib.sh"
CASES=("1024 16,16,16" "1024 8,8,8,8" "256 16,16,16,16" "4096 8,8,8,8" "256 8,8,8,8,8")
ab_times() { timeout $(cap 200) python3 $R/tools/diag/kron_fwd_times.py "${CASES[@]}"; }
diag_ab_wheels ab_times
diag_kron_cuda_tests 300
diag_kron_small_sanitize 420 memcheck
diag_kron_small_sanitize 540 racecheck
echo "total $((SECONDS - T0))s"
