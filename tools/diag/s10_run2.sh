#!/usr/bin/env bash
# Session 10, second call: the small-factor forward (kron_small.h): its CUDA tests, memcheck and
# racecheck, and its kernel time against the other kernels on the issue's small cases.
source "$(dirname "$0")/lib.sh"
diag_begin
for c in "1024 8,8,8,8 small" "1024 8,8,8,8 old" "1024 16,16,16 small" "1024 16,16,16 old" "1024 32,32 small" \
         "1024 32,32 new" "4096 32,32 small" "4096 32,32 new" "1024 8,16,32 small" "1024 8,16,32 new" \
         "4096 8,8,8,8 small" "4096 16,16,16 small"; do
  set -- $c
  timeout $(cap 200) python3 $R/tools/diag/kron_fwd_one.py $1 $2 $3 --time
done
timeout $(cap 260) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "small or forward_kernels or kept_t0 or forward_kernel_choice" > $OUT/kron_small_tests.txt 2>&1
echo "kron small cuda tests: $(tail -1 $OUT/kron_small_tests.txt)"; grep -E "^FAILED" $OUT/kron_small_tests.txt | head -5
timeout $(cap 320) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_small_check.py > $OUT/memcheck_small.txt 2>&1
echo "memcheck exit $?: $(grep -E "ERROR SUMMARY" $OUT/memcheck_small.txt | tail -1); $(grep -c ' ok$' $OUT/memcheck_small.txt) ok, $(grep -c WRONG $OUT/memcheck_small.txt) wrong"
timeout $(cap 420) compute-sanitizer --tool racecheck --error-exitcode 3 python3 $R/tools/diag/kron_small_check.py > $OUT/racecheck_small.txt 2>&1
echo "racecheck exit $?: $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/racecheck_small.txt | tail -1); $(grep -c ' ok$' $OUT/racecheck_small.txt) ok"
f=$OUT/ncu_small_1024_8x8x8x8
timeout $(cap 500) ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis_Tables --kernel-name regex:kron_small --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_fwd_one.py 1024 8,8,8,8 small > $f.txt 2>&1
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|One or More Eligible|bank|Bank" $f.txt | sed 's/  */ /g' | cut -c1-200 | head -16
echo "total $((SECONDS - T0))s after build"
