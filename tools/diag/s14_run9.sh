#!/usr/bin/env bash
# Session 14, call 9: where the low-density backward's module-level time goes (tools/diag/bsr_bwd_host.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 200) python3 $R/tools/diag/bsr_bwd_host.py 2>&1 | grep -v "Warn\|warn_once" | tee $OUT/bsr_bwd_host.txt
echo "total $((SECONDS - T0))s after install"
