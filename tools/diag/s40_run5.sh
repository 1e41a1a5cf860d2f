#!/usr/bin/env bash
# Session 40, call 5: where a BlockSparseLinear forward's eager time goes beyond its device time at
# low density (tools/diag/bsr_eager_gap.py), at the wheel of 52c351b.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
(cd $R/tools/diag && timeout $(cap 200) python3 bsr_eager_gap.py)
echo "total $((SECONDS - T0))s"
