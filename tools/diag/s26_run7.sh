#!/usr/bin/env bash
# Session 26, call 7: the bsr layer backward with its weight gradient on a side stream
# (bsr._concurrent_grads) against in order (tools/diag/bsr_concurrent_grads.py), at the bench's
# cells with a backward near or over 1.3 and the BERT shapes, without bias (as the bench) and with.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R/tools/diag && timeout $(cap 400) python3 bsr_concurrent_grads.py \
  bf16:3072:768:128:0.1:nobias bf16:768:3072:128:0.1:nobias bf16:3072:768:128:0.5:nobias \
  bf16:4096:4096:128:0.1:nobias bf16:4096:4096:64:0.25:nobias bf16:4096:4096:32:0.1:nobias \
  tf32:4096:4096:64:0.25:nobias tf32:4096:4096:128:0.1:nobias tf32:4096:4096:64:0.1:nobias \
  fp16:4096:4096:128:0.05:nobias bf16:4096:4096:128:0.5:nobias bf16:3072:768:128:0.1 tf32:4096:4096:128:0.1 \
  2>&1 | tee $OUT/concurrent.txt | grep -v "^ *File\|^    "
echo "total $((SECONDS - T0))s"
