#!/usr/bin/env bash
# Session 40, call 7: the bench's d = 0.5 blocks-of-128 cells ran faster eager than in CUDA graphs
# (bf16 192.7 against 227.4 µs): eager, burst, graph (20 calls and 1 call per graph) and the
# kernels of one graph replay (tools/diag/bsr_eager_gap.py --graph-profile), wheel of 52c351b.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
(cd $R/tools/diag && timeout $(cap 200) python3 bsr_eager_gap.py --graph-profile 8192,4096,4096,128,0.5,bfloat16 \
  8192,4096,4096,128,0.5,float16 8192,4096,4096,64,0.5,bfloat16 8192,4096,4096,128,0.25,bfloat16)
echo "total $((SECONDS - T0))s"
