#!/usr/bin/env bash
# Session 10, third call: the small-factor forward with one XOR per element address: kernel times
# (both block sizes) against the other kernels, its CUDA tests, ncu with stall-sampled SASS.
source "$(dirname "$0")/lib.sh"
diag_begin
for c in "1024 8,8,8,8 small" "1024 8,8,8,8 small:threads=128" "1024 16,16,16 small" "1024 16,16,16 small:threads=128" \
         "1024 32,32 small" "1024 32,32 small:threads=256" "1024 32,32 new" "4096 32,32 small" "4096 32,32 new" \
         "1024 8,16,32 small" "1024 8,16,32 new" "4096 8,8,8,8 small" "4096 16,16,16 small" "4096 16,16,16 small:threads=128"; do
  set -- $c
  timeout $(cap 200) python3 $R/tools/diag/kron_fwd_one.py $1 $2 $3 --time
done
timeout $(cap 260) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "small or forward_kernels or kept_t0 or forward_kernel_choice" > $OUT/kron_small_tests.txt 2>&1
echo "kron small cuda tests: $(tail -1 $OUT/kron_small_tests.txt)"; grep -E "^FAILED" $OUT/kron_small_tests.txt | head -5
for c in "1024 8,8,8,8 small" "1024 16,16,16 small"; do
  set -- $c
  f=$OUT/ncu_small_$1_${2//,/x}
  timeout $(cap 420) ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section SchedulerStats --section LaunchStats --kernel-name regex:kron_small --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_fwd_one.py $1 $2 $3 > $f.txt 2>&1
  echo "== $c"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|One or More Eligible|Executed Ipc A|Grid Size|Block Size" $f.txt | sed 's/  */ /g' | cut -c1-200 | head -14
  timeout $(cap 540) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:kron_small --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass python3 $R/tools/diag/kron_fwd_one.py $1 $2 $3 > $f.src.csv 2>/dev/null
  python3 $R/tools/diag/ncu_stalls.py $f.src.csv 10 | cut -c1-180
done
echo "total $((SECONDS - T0))s after build"
