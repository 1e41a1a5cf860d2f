#!/usr/bin/env bash
# Session 15, call 3: kernel µs of the cluster (multicast) dds against the one-column and grouped
# kernels in one run (bf16; call 2's fp16 rows of the other two kernels matched bf16's), then the
# multicast kernel's forward under racecheck-free memcheck on one bench-sized case.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
BSR_MC_DTYPES=bf16 timeout $(cap 400) python3 $R/tools/diag/bsr_mc.py multicast grouped one-column > $OUT/bsr_mc.txt 2>&1; echo "bsr_mc exit $?"
sed -n '/kernel µs/,$p' $OUT/bsr_mc.txt
echo "total $((SECONDS - T0))s after install"
