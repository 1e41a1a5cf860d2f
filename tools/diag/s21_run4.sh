#!/usr/bin/env bash
# Session 21, call 4: the split count of the 16-bit sm_90a sdd, swept (SPARSEKERN_BSR_SDD_SPLIT=0 /
# 2 / 3 / 4 / 8 / 16) over layers whose weight gradient has 14-102 slices of 64 rows
# (tools/diag/bsr_split_ab.py), to set the auto rule: call 3 measured auto (one tile per consumer)
# slower at 102 slices and faster at 28 and 52.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
for sp in 0 2 3 4 8 16 0; do
  SPARSEKERN_BSR_SDD_SPLIT=$sp timeout $(cap 500) python3 $R/tools/diag/bsr_split_ab.py 3072:768:128:0.05 3072:768:128:0.1 1024:4096:128:0.1 4096:4096:128:0.05 4096:1024:64:0.1 768:3072:64:0.1 2>&1 | grep -v Warn
done
echo "total $((SECONDS - T0))s"
