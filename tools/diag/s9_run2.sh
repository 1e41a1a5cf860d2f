#!/usr/bin/env bash
# Session 9, second call (issue 3): dynamic tile schedules of the sm_90a dds kernels (tile counter
# in the caller's workspace; SPARSEKERN_BSR_SCHEDULE=static|dynamic|heavy). bsr CUDA tests (each
# kernel x schedule in subprocesses), memcheck over the new cases, kernel times per schedule, and
# grouped vs one-column for b = 128 under the new default. Summary lines last.
source "$(dirname "$0")/lib.sh"
diag_begin
T=$R/tests/python
timeout $(cap 150) python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -x > $OUT/bsr_tests.txt 2>&1
echo "bsr cuda tests: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED" $OUT/bsr_tests.txt | head -5
timeout $(cap 190) compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -k "many_columns or (grouped_edges and 128 and not each)" > $OUT/bsr_memcheck.txt 2>&1
echo "memcheck exit $? $(grep -E "passed|failed|ERROR SUMMARY" $OUT/bsr_memcheck.txt | tail -2 | tr '\n' ' ')"
prof() {  # label, dtype, blocks, env...
  local label=$1 dt=$2 blocks=$3; shift 3
  echo "=== $label"
  env "$@" BSR_PROFILE_BLOCKS=$blocks timeout $(cap 570) python3 $R/tools/diag/bsr_profile.py $dt 2>&1 | grep -E "^b=|dense" | sed -E 's/ \| fwd: .*//'
}
{
  prof "bf16 heavy (default)" bfloat16 128,64,32 X=1
  prof "bf16 static" bfloat16 128,64,32 SPARSEKERN_BSR_SCHEDULE=static
  prof "bf16 heavy, grouped=0" bfloat16 128 SPARSEKERN_BSR_GROUPED=0
  prof "bf16 heavy, grouped=1" bfloat16 128 SPARSEKERN_BSR_GROUPED=1
  prof "bf16 dynamic" bfloat16 128,64 SPARSEKERN_BSR_SCHEDULE=dynamic
  prof "tf32 heavy, grouped=0" tf32 128,64 SPARSEKERN_BSR_GROUPED=0
  prof "tf32 heavy, grouped=1" tf32 128,64 SPARSEKERN_BSR_GROUPED=1
  prof "fp16 heavy, grouped=0" float16 128 SPARSEKERN_BSR_GROUPED=0
  prof "fp16 heavy, grouped=1" float16 128 SPARSEKERN_BSR_GROUPED=1
} > $OUT/bsr_kernel_times.txt 2>&1
cat $OUT/bsr_kernel_times.txt
echo "total $((SECONDS - T0))s after build"
