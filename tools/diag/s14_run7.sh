#!/usr/bin/env bash
# Session 14, call 7: forward kernel selections of the issue-5 cases below 60% of the roofline
# (tools/diag/kron_fwd_sweep.py), to see whether the plan's defaults leave time on the table.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
KRON_SWEEP=${KRON_SWEEP:-} timeout $(cap 300) python3 $R/tools/diag/kron_fwd_sweep.py 2>&1 | grep -v Warn | tee $OUT/kron_fwd_sweep.txt
echo "total $((SECONDS - T0))s after install"
