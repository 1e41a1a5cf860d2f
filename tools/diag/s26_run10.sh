#!/usr/bin/env bash
# Session 26, call 10: the eager backward with and without the concurrent weight gradient
# (tools/diag/bsr_concurrent_eager.py): bench-style event timing, host time, graph time, and the
# kernels of one eager call on their streams.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R/tools/diag && timeout $(cap 200) python3 bsr_concurrent_eager.py bf16:4096:4096:128:0.5 bf16:4096:4096:128:0.25 \
  bf16:768:3072:128:0.1 fp16:4096:4096:64:0.1 bf16:4096:4096:32:0.05 2>&1 | tee $OUT/eager.txt | grep -v "^ *File\|^    [a-z]"
echo "total $((SECONDS - T0))s"
