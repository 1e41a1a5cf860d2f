#!/usr/bin/env bash
# Session 37, call 7: the recompute backward's T0 step (states not kept: SPARSEKERN_KRON_SAVE_STATES=0
# or a backward without saved states) with call 3's loop form (unrolled 8, XT's stride a constant
# at one row per tile), against 6e3f258's wheel, alternated; the kron CUDA tests, memcheck and
# racecheck of the register-tile backward's check script.
source "$(dirname "$0")/lib.sh"
_recompute_times() {
  timeout $(cap 200) python3 $R/tools/diag/kron_bwd_sel_times.py "new" 2 "1024 64,64" "4096 64,64" "1024 32,32" \
    "16 32,32" "2048 32,32" "32 64,64"
}
diag_ab_wheels _recompute_times
diag_kron_cuda_tests 330
diag_kron_bwd_sanitize 480 560
echo "total $((SECONDS - T0))s"
