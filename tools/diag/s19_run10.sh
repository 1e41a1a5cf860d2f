#!/usr/bin/env bash
# Session 19, call 10 (same wheel as call 9): kernel times of the 16-bit b = 32 layers at d = 0.05 /
# 0.1 with SPARSEKERN_BSR_SDD_GROUP=0 and 1, interleaved twice (call 9's bench had their eager
# backward slower at d = 0.05, as for b = 64 / 128 whose kernels did not change), then the issue-3
# target bench a second time.
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
for r in 1 2; do
  for g in 0 1; do
    SPARSEKERN_BSR_SDD_GROUP=$g BSR_PROFILE_KERNELS=1 BSR_PROFILE_BLOCKS=32 BSR_PROFILE_DENSITIES=0.05,0.1 \
      timeout $(cap 200) python3 $R/tools/diag/bsr_profile.py bfloat16 float16 2>&1 | grep -E "^b=|dense" | sed "s/^/group=$g /" | cut -c1-300
  done
done
diag_bsr_bench 590
tail -45 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after install"
