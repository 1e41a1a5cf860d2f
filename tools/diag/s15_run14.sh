#!/usr/bin/env bash
# Session 15, call 14: the grouped dds's producer asking for its next dynamic tile one tile ahead.
# Kernel µs against the unchanged one-column kernel (the control; call 9 measured both before the
# change), then the grouped kernel's edge tests through every kernel and schedule.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
BSR_EPI_DTYPES=bf16,fp16 BSR_EPI_BLOCKS=64,128 timeout $(cap 150) python3 $R/tools/diag/bsr_epilogue.py grouped-tma one-column > $OUT/bsr_prefetch.txt 2>&1; echo "exit $?"
cat $OUT/bsr_prefetch.txt
timeout $(cap 300) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "grouped_edges" > $OUT/edges.txt 2>&1; echo "grouped edge tests: $(tail -1 $OUT/edges.txt)"; grep -E "^FAILED" $OUT/edges.txt | head -5
echo "total $((SECONDS - T0))s after install"
