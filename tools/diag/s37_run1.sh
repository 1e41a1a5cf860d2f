#!/usr/bin/env bash
# Session 37, call 1 (wheel of 3dbdf9c, the code of record): where the kept-T0 register-tile
# backward's time goes at the two cases over the 2.5x line (1024 × (32,32) 2.56, (64,64) 2.57):
# its plan overridden (rows per tile, stages, grid, tile) against the default, alternated in one
# process, with per-kernel device µs; then ncu's speed-of-light / occupancy / stall sections of
# both kernels (main and the partials' reduction) at the two cases.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
K=$R/tools/diag/kron_bwd_kept_sel.py
timeout $(cap 150) python3 $K ";new:rows=2;new:rows=2,stages=2;new:rows=3;new:rows=1,stages=2;new:rows=8;new:rows=4,grid=128" 3 "1024 32,32"
timeout $(cap 300) python3 $K ";new:grid=132;new:grid=198;new:tile=8;new:tile=8,rows=2;new:rows=1,stages=1" 3 "1024 64,64"
timeout $(cap 360) python3 $K ";new:grid=132;new:tile=8" 2 "4096 64,64" "2048 32,32"
for c in "1024 32,32" "1024 64,64"; do
  f=$OUT/ncu_${c// /_}.txt; f=${f//,/x}
  timeout $(cap 520) ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --kernel-name regex:kron --launch-skip 3 --launch-count 6 \
    python3 $R/tools/diag/kron_bwd_kept.py $c > $f 2>&1
  echo "== ncu $c"; grep -E "kron_|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Issued Warp|Memory Throughput|DRAM Throughput|L2 Hit|Waves Per SM|Grid Size|Dynamic Shared" $f | head -60
done
echo "total $((SECONDS - T0))s"
