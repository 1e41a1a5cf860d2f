#!/usr/bin/env bash
# Session 15, call 12: the BERT-base rows of call 11's bench took 54 -> 60 µs per module call
# where the new rule sends them to the grouped kernel, whose kernel time call 9-10 measured equal
# to the one-column kernel's there: host time vs GPU time per call, each kernel
# (tools/diag/bsr_grouped_host.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 200) python3 $R/tools/diag/bsr_grouped_host.py 2>&1 | tee $OUT/grouped_host.txt
echo "total $((SECONDS - T0))s after install"
