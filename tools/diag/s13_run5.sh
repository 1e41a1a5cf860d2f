#!/usr/bin/env bash
# Session 13, call 5: the natural split's mode-0 pass (SPARSEKERN_KRON_HEAD=kernel) against cuBLAS's
# strided-batched GEMMs over heads of 4, 8 and 16 (session 12's backlog found it faster only at
# 64 x [8^5]), to decide whether small heads should take it by default.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R/tools/diag
timeout $(cap 300) python3 kron_head.py 16:8,8,8,8,8 64:8,8,8,8,8 256:8,8,8,8,8 1024:8,8,8,8,8 \
  16:4,4,4,4,4,4,4,4 64:4,4,4,4,4,4,4,4 256:4,4,4,4,4,4,4,4 64:8,16,16,16 256:8,16,16,16 \
  64:16,8,8,8,8 256:16,8,8,8,8 32:8,32,32,32 > $OUT/kron_head_sweep.txt 2>&1
cat $OUT/kron_head_sweep.txt
echo "total $((SECONDS - T0))s after install"
