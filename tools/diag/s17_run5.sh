#!/usr/bin/env bash
# Session 17, call 5: the wheel with the grouped dds's 256-row A box: the bsr dds CUDA tests and
# memcheck over the grouped edge and panel tests (grouped forced), the one-column vs grouped forward
# kernel time at blocks of 32 and 64 (where use_grouped switches).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 200 "dds or grouped or panels"
diag_bsr_grouped_sanitize 240 memcheck "panels_and_bias or (grouped_edges and not each_kernel)"
for g in 0 1; do
  SPARSEKERN_BSR_GROUPED=$g PYTHONPATH=$R/tools/diag timeout $(cap 300) python3 $R/tools/diag/bsr_fwd_kernel_us.py "32:0.1,0.25,0.4,0.5 64:0.05,0.1" bfloat16,float16 2>&1 | tee -a $OUT/grouped_switch.txt
done
echo "total $((SECONDS - T0))s after install"
