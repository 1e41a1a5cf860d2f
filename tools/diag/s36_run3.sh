#!/usr/bin/env bash
# Session 36, call 3 (1848f75's wheel): the kept-T0 register-tile backward's instruction mix outside
# its k loops, as call 1 measured the forward's: ncu source counters (csv back) of kron_fast_bwd at
# 1024 × (64 ⊗ 64) and 1024 × (32 ⊗ 32), whose backward / forward went over 2.5 (2.65, 2.6) once
# call 2's forward got faster.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_ncu_kron_bwd_kept_src 150 "1024 64,64" "1024 32,32"
echo "total $((SECONDS - T0))s"
