#!/usr/bin/env bash
# Session 19, call 5: the register-tile backward specialised to one factor width (call 4) plus, with
# T0 kept and G1 over DN/DT (one stage), XN copied as its own group during phase A and the next
# tile's T0T during phase B, against the previous wheel, interleaved twice; the kron CUDA tests;
# memcheck and racecheck of the backward (racecheck now with a capped grid).
source "$(dirname "$0")/lib.sh"
CASES=("16 32,32" "1024 32,32" "1024 64,64" "2048 64,64" "4096 64,64" "128 32,32,32" "32 64,64")
ab() { timeout $(cap 200) python3 $R/tools/diag/kron_fwd_times.py "${CASES[@]}" --save; }
diag_ab_wheels ab
diag_kron_cuda_tests 400
diag_kron_bwd_sanitize 480 590
echo "total $((SECONDS - T0))s"
