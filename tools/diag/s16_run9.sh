#!/usr/bin/env bash
# Session 16, call 9: host time per BlockSparseLinear call on the device machine (the bench's
# d = 0.05 and BERT rows looked host-bound at ~59 µs per forward), b = 128 and 64, bf16, with a
# cProfile of the module call.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 60) python3 $R/tools/diag/bsr_host.py cuda 128 bfloat16 --profile > $OUT/bsr_host_128.txt 2>&1; head -40 $OUT/bsr_host_128.txt
timeout $(cap 90) python3 $R/tools/diag/bsr_host.py cuda 64 bfloat16 > $OUT/bsr_host_64.txt 2>&1; head -20 $OUT/bsr_host_64.txt
echo "total $((SECONDS - T0))s after install"
