#!/usr/bin/env bash
# Session 23, call 6: the kernels of the layer backward with and without the fused bias gradient
# (tools/diag/bsr_rowsum_kernels.py) where the A/B of call 5 gained less than the separate pass
# costs (tf32 b = 64 d = 0.25, b = 128 d = 0.1 / 0.05) and where it lost (bf16 b = 64 d = 0.25).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R/tools/diag && timeout $(cap 300) python3 bsr_rowsum_kernels.py tf32:4096:4096:64:0.25 tf32:4096:4096:128:0.1 \
  tf32:4096:4096:128:0.05 tf32:4096:4096:64:0.1 bf16:4096:4096:64:0.25 bf16:4096:4096:32:0.05 2>&1 | tee $OUT/rowsum_kernels.txt | cut -c1-900
echo "total $((SECONDS - T0))s"
