#!/usr/bin/env bash
# Session 15, call 5 (H100, wheel of 9fc807d): the (64 ⊗ 64) register-tile forward's plan overrides
# (tools/diag/kron_fwd_sweep.py, KRON_SWEEP=64; session 14 swept them on an H200) and the
# two-factor backward's (tools/diag/kron_bwd_fast.py) at 1024 and 4096 rows: the issue-5 cells
# that miss on the H100 by a few percent (4096 x (64,64) at 57.3% of the roofline, 1024 x (64,64)
# backward / forward 2.59).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R/tools/diag
KRON_SWEEP=64 timeout $(cap 200) python3 kron_fwd_sweep.py > $OUT/kron_fwd_sweep.txt 2>&1; echo "fwd sweep exit $?"; cat $OUT/kron_fwd_sweep.txt
KRON_BWD_CASES=1024x64x64,4096x64x64 KRON_BWD_SWEEP="tile=8;grid=132;rows=1,stages=1;rows=2,stages=2" timeout $(cap 420) python3 kron_bwd_fast.py $OUT/kron_bwd_fast.json > $OUT/kron_bwd_fast.txt 2>&1; echo "bwd exit $?"; cat $OUT/kron_bwd_fast.txt
echo "total $((SECONDS - T0))s after install"
