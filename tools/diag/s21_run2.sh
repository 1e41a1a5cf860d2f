#!/usr/bin/env bash
# Session 21, call 2: where the ~50-95 µs of host time per BlockSparseLinear forward at 8192 rows
# goes (call 1: host 95 µs with grad at bf16 b = 128 d = 0.1 against 20-32 µs at m = 16 in session
# 16; the BERT-base rows' eager forward 82 µs for a 30 µs kernel): tools/diag/bsr_host_api.py.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 300) python3 $R/tools/diag/bsr_host_api.py > $OUT/bsr_host_api.txt 2>&1
echo "exit $?"; grep -v "^-\|^$" $OUT/bsr_host_api.txt | cut -c1-170
echo "total $((SECONDS - T0))s"
