#!/usr/bin/env bash
# Session 18, call 5 (wheel of 626ae04): the kernels of the two-factor kept-T0 backward and their
# times, and where the register-tile backward's warps wait now (1024 x (64 x 64): 2.54x its forward).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 60) python3 $R/tools/diag/kron_bwd_kernels.py "1024 64,64" "4096 64,64" "1024 32,32" "128 32,32,32"
f=$OUT/ncu_bwdkept_1024_64x64
timeout $(cap 150) ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis_Tables --kernel-name regex:kron_fast_bwd --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_bwd_kept.py 1024 64,64 > $f.txt 2>&1
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|One or More Eligible|bank|Grid Size|Block Size|Dynamic Shared" $f.txt | sed 's/  */ /g' | cut -c1-160 | head -14
timeout $(cap 240) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:kron_fast_bwd --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass python3 $R/tools/diag/kron_bwd_kept.py 1024 64,64 > $f.src.csv 2>/dev/null
python3 $R/tools/diag/ncu_stalls.py $f.src.csv 12 | cut -c1-170
echo "total $((SECONDS - T0))s"
