#!/usr/bin/env bash
# Session 9, first call (issue 3): the grouped sm_90a dds instantiated for blocks of 128 (256-row
# tiles of one block column) and the per-block warpgroup fences of the grouped consumer. bsr CUDA
# tests (default rule, and the grouped edge cases forced each way), memcheck over the b = 128
# grouped edge cases, kernel times grouped vs one-column for 16-bit and tf32, b = 64 / 128.
source "$(dirname "$0")/lib.sh"
diag_begin
T=$R/tests/python
timeout $(cap 200) python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -x > $OUT/bsr_tests.txt 2>&1
echo "bsr cuda tests: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED" $OUT/bsr_tests.txt | head -5
SPARSEKERN_BSR_GROUPED=1 timeout $(cap 260) compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -k "grouped_edges and 128 and not each" > $OUT/bsr_memcheck.txt 2>&1
echo "memcheck exit $? $(grep -E "passed|failed|ERROR SUMMARY" $OUT/bsr_memcheck.txt | tail -2 | tr '\n' ' ')"
for dt in bfloat16 tf32 float16; do
  for g in 1 0; do
    echo "=== $dt SPARSEKERN_BSR_GROUPED=$g"
    SPARSEKERN_BSR_GROUPED=$g BSR_PROFILE_BLOCKS=128,64 timeout $(cap 560) python3 $R/tools/diag/bsr_profile.py $dt 2>&1 | grep -E "^b=|dense" | sed -E 's/ \| fwd: .*//'
  done
done > $OUT/bsr_kernel_times.txt 2>&1
cat $OUT/bsr_kernel_times.txt
echo "total $((SECONDS - T0))s after build"
