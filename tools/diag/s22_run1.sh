#!/usr/bin/env bash
# Session 22, call 1: split K in the SM80 sdd (tc/kernel.cuh sdd_body, sdd_tc_splits in
# bsr_cuda.cu). The sdd / split CUDA tests, then the split count swept (SPARSEKERN_BSR_SDD_SPLIT=
# 0 / auto / 2 / 3 / 4 / 6 / 8) over the tf32 weight gradients that run it (8192 × 4096 → 4096,
# b = 128 d = 0.05 / 0.1, b = 64 d = 0.05 / 0.1 / 0.25, b = 32 d = 0.1) and the 16-bit blocks of
# 32 below the grouped kernel's threshold (d = 0.05), to set the auto rule.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 200 "sdd_split or sdd_tf32 or sdd_tma or workspace or graph_capture or sdd_group"
sweep() {
  BSR_DTYPE=tf32 SPARSEKERN_BSR_SDD_SPLIT=$1 timeout $(cap 560) python3 $R/tools/diag/bsr_split_ab.py \
    4096:4096:128:0.1 4096:4096:128:0.05 4096:4096:64:0.1 4096:4096:64:0.05 4096:4096:64:0.25 4096:4096:32:0.1 2>&1 | grep -v Warn
  BSR_DTYPE=bf16 SPARSEKERN_BSR_SDD_SPLIT=$1 timeout $(cap 560) python3 $R/tools/diag/bsr_split_ab.py \
    4096:4096:32:0.05 3072:768:32:0.1 2>&1 | grep -v Warn
}
for sp in 0 auto 2 3 4 6 8 0 auto; do sweep $sp; done
echo "total $((SECONDS - T0))s"
