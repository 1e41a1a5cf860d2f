#!/usr/bin/env bash
# Session 24, call 8: the tf32 thresholds of the grouped dds (use_grouped: b = 128 from d = 0.3 with
# 6 blocks per column, b = 64 from 0.2) date from session 9 (H200), before the grouped kernel's
# single A box, chunked heaviest-first schedule and bias overlap. Kernel µs of the 8192 x 4096 ->
# 4096 forward with TF32 under SPARSEKERN_BSR_GROUPED=0 / 1 (and auto), twice, interleaved.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R/tools/diag
for round in 1 2; do
  for g in 0 1 auto; do
    if [ $g = auto ]; then unset SPARSEKERN_BSR_GROUPED; else export SPARSEKERN_BSR_GROUPED=$g; fi
    TF32=1 timeout $(cap 280) python3 bsr_fwd_kernel_us.py "64:0.05,0.1,0.15,0.2,0.25 128:0.05,0.1,0.15,0.2,0.25,0.3" float32 2>&1 | tee -a $OUT/tf32_grouped.txt
  done
done
unset SPARSEKERN_BSR_GROUPED
echo "total $((SECONDS - T0))s"
