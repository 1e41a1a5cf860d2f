#!/usr/bin/env bash
# Session 14, call 1 (wheel with the dense sdd path, placeholder thresholds): the bsr CUDA tests of
# the sdd/tf32/workspace/linear paths (53cfb5b's refactor included), then the weight-gradient sdd's
# kernel time with the dense path forced on (SPARSEKERN_BSR_SDD_DENSE=1) and off (=0), bf16 and
# tf32 at 4096 -> 4096 and the BERT-base shapes, fp16 at 4096 -> 4096, to set the thresholds.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 120 "(tf32 or workspace or bias or sdd or linear or dense) and not each_kernel"
for mode in 0 1; do
  SPARSEKERN_BSR_SDD_DENSE=$mode SDD_SHAPES=4096x4096,768x3072,3072x768 timeout $(cap 330) \
    python3 $R/tools/diag/bsr_sdd_dense.py bfloat16 tf32 >> $OUT/sdd_dense.txt 2>&1
  SPARSEKERN_BSR_SDD_DENSE=$mode SDD_SHAPES=4096x4096 timeout $(cap 380) \
    python3 $R/tools/diag/bsr_sdd_dense.py float16 >> $OUT/sdd_dense.txt 2>&1
done
grep -E "^mode" $OUT/sdd_dense.txt | awk '{print $1,$2,$3,$4,$5,$7,$10,$13,$15}' | head -200
grep -E "Error|error:" $OUT/sdd_dense.txt | head -5
echo "total $((SECONDS - T0))s after install"
