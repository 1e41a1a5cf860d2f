#!/usr/bin/env bash
# Session 37, call 9 (the final wheel): where the kept-T0 register-tile backward's instructions go
# now (ncu source counters at 1024 × (64 ⊗ 64) and 1024 × (32 ⊗ 32), csv back for
# tools/diag/ncu_regions.py), as session 36's call 6 measured them before this session's changes.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_ncu_kron_bwd_kept_src 200 "1024 64,64" "1024 32,32"
echo "total $((SECONDS - T0))s"
