#!/usr/bin/env bash
# Session 19, call 8: the grouped SM80 sdd (blocks of one block row side by side in a CTA: tf32
# b = 32 in fours, b = 64 / 128 in pairs of 64-wide tiles; 16-bit b = 32 in fours). Kernel times of
# BlockSparseLinear's forward and backward at 8192 x 4096 -> 4096 (tools/diag/bsr_profile.py) with
# SPARSEKERN_BSR_SDD_GROUP=1 (one tile per CTA, the previous kernel) and auto, interleaved twice;
# then the bsr sdd CUDA tests (test_sdd_group_each runs each group size), the tf32 linear tests,
# and compute-sanitizer memcheck over the grouped cases.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
prof() {
  SPARSEKERN_BSR_SDD_GROUP=$1 BSR_PROFILE_KERNELS=1 BSR_PROFILE_BLOCKS=$2 BSR_PROFILE_DENSITIES=$3 \
    timeout $(cap $4) python3 $R/tools/diag/bsr_profile.py $5 2>&1 | grep -E "^b=|dense" | sed "s/^/group=$1 /" | cut -c1-420
}
for r in 1 2; do
  for g in 1 auto; do
    prof $g 32,64,128 0.05,0.1,0.25 200 tf32
    prof $g 32 0.1,0.25 240 bfloat16
  done
done
diag_bsr_cuda_tests 420 "sdd or linear_tf32"
SPARSEKERN_BSR_SDD_DENSE=0 timeout $(cap 520) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "sdd_grouped_rows" > $OUT/san_memcheck.txt 2>&1
echo "memcheck grouped sdd: $(grep -E 'ERROR SUMMARY' $OUT/san_memcheck.txt | tail -1) | $(tail -1 $OUT/san_memcheck.txt)"
SPARSEKERN_BSR_SDD_DENSE=0 timeout $(cap 590) compute-sanitizer --tool racecheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "sdd_grouped_rows and 32" > $OUT/san_racecheck.txt 2>&1
echo "racecheck grouped sdd b=32: $(grep -E 'RACECHECK SUMMARY' $OUT/san_racecheck.txt | tail -1) | $(tail -1 $OUT/san_racecheck.txt)"
echo "total $((SECONDS - T0))s"
