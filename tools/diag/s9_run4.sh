#!/usr/bin/env bash
# Session 9, fourth call (issue 3): the producers read each tile's lists one tile ahead (dds and
# grouped dds). bsr CUDA tests, memcheck over the schedule/edge cases, kernel times (default: the
# dynamic heaviest-first schedule) to compare with s9_run2's. Summary lines last.
source "$(dirname "$0")/lib.sh"
diag_begin
T=$R/tests/python
timeout $(cap 200) python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda > $OUT/bsr_tests.txt 2>&1
echo "bsr cuda tests: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED" $OUT/bsr_tests.txt | head -5
timeout $(cap 240) compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -k "many_columns or (grouped_edges and 128 and not each)" > $OUT/bsr_memcheck.txt 2>&1
echo "memcheck exit $? $(grep -E "passed|failed|ERROR SUMMARY" $OUT/bsr_memcheck.txt | tail -2 | tr '\n' ' ')"
prof() {  # label, dtype, blocks, env...
  local label=$1 dt=$2 blocks=$3; shift 3
  echo "=== $label"
  env "$@" BSR_PROFILE_BLOCKS=$blocks timeout $(cap 540) python3 $R/tools/diag/bsr_profile.py $dt 2>&1 | grep -E "^b=|dense" | sed -E 's/ \| fwd: .*//'
}
{
  prof "bf16 (default)" bfloat16 128,64,32 X=1
  prof "fp16 (default)" float16 128,64 X=1
  prof "tf32 (default)" tf32 128,64 X=1
  prof "bf16 static" bfloat16 128,64 SPARSEKERN_BSR_SCHEDULE=static
} > $OUT/bsr_kernel_times.txt 2>&1
cat $OUT/bsr_kernel_times.txt
echo "total $((SECONDS - T0))s after build"
