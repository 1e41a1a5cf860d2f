#!/usr/bin/env bash
# Session 13, call 2 (wheel with the 64 × 64 vector transpose and the sdd copy threshold): the
# tf32/sdd/linear bsr CUDA tests, the tf32 BlockSparseLinear kernel split with and without the
# transposed copies, compute-sanitizer memcheck and racecheck over the copy paths.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 150 "tf32 or sdd or linear or workspace"
for c in 1 0; do
  echo "=== tf32, SPARSEKERN_BSR_TF32_COPIES=$c" >> $OUT/bsr_tf32_profile.txt
  SPARSEKERN_BSR_TF32_COPIES=$c BSR_PROFILE_KERNELS=1 BSR_PROFILE_BLOCKS=64,128 timeout $(cap 250) \
    python3 $R/tools/diag/bsr_profile.py tf32 >> $OUT/bsr_tf32_profile.txt 2>&1
done
grep -E "^b=|dense" $OUT/bsr_tf32_profile.txt | cut -c1-100
for tool in memcheck racecheck; do
  timeout $(cap 330) compute-sanitizer --tool $tool python3 $R/tools/diag/bsr_tf32_check.py > $OUT/bsr_san_$tool.txt 2>&1
  echo "bsr $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|cases ok' $OUT/bsr_san_$tool.txt | tr '\n' ' ')"
done
echo "total $((SECONDS - T0))s after install"
