#!/usr/bin/env bash
# Session 24, call 7 (wheel of a98f7e6, no bsr change since f7497db): where the host time of the
# eager BlockSparseLinear backward goes (the bench's low-density cells time the host there):
# tools/diag/bsr_bwd_cprofile.py without the bias gradient, as the bench asks.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
BWD_BIAS=0 timeout $(cap 200) python3 $R/tools/diag/bsr_bwd_cprofile.py 2>&1 | tee $OUT/bwd_cprofile.txt | head -60
echo "total $((SECONDS - T0))s"
