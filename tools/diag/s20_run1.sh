#!/usr/bin/env bash
# Session 20, call 1: conflict-free 32-bit fragment loads for tf32 M/N-major tiles (the SM80 sdd of
# a tf32 weight gradient and the dds with N-major tf32 blocks). A/B of the sdd's kernel time,
# previous commit's wheel against this one's, on the SM80 kernel (copies withheld, dense path off),
# interleaved twice; then, on the new wheel only, the other sdd paths at the same cells (copies +
# wgmma forced, the dense product) to re-place the thresholds between them; then ncu of the
# b = 64 d = 0.1 sdd (bank conflicts and duration).
source "$(dirname "$0")/lib.sh"
sm80() {
  SPARSEKERN_BSR_TF32_COPIES=0 SPARSEKERN_BSR_SDD_DENSE=0 SDD_BLOCKS=16,32,64,128 SDD_DENSITIES=0.05,0.1,0.25,0.5 \
    timeout $(cap $1) python3 $R/tools/diag/bsr_sdd_dense.py tf32 2>&1 | grep -E "b=" | sed "s/^/sm80 /" | cut -c1-200
}
AB_N=0
ab() { AB_N=$((AB_N + 1)); sm80 $((75 * AB_N)); }
diag_ab_wheels ab
echo "== new wheel: copies + wgmma forced (b = 64, 128), dense product forced"
SPARSEKERN_BSR_SDD_WGMMA=1 SPARSEKERN_BSR_SDD_DENSE=0 SDD_BLOCKS=64,128 SDD_DENSITIES=0.1,0.25,0.5,0.75 \
  timeout $(cap 390) python3 $R/tools/diag/bsr_sdd_dense.py tf32 2>&1 | grep -E "b=" | sed "s/^/wgmma /" | cut -c1-200
SPARSEKERN_BSR_SDD_DENSE=1 SDD_BLOCKS=16,32,64,128 SDD_DENSITIES=0.1,0.25,0.5,0.75 \
  timeout $(cap 450) python3 $R/tools/diag/bsr_sdd_dense.py tf32 2>&1 | grep -E "b=" | sed "s/^/dense /" | cut -c1-200
SPARSEKERN_BSR_TF32_COPIES=0 SPARSEKERN_BSR_SDD_DENSE=0 SDD_BLOCKS=16,32,64,128 SDD_DENSITIES=0.75 \
  timeout $(cap 480) python3 $R/tools/diag/bsr_sdd_dense.py tf32 2>&1 | grep -E "b=" | sed "s/^/sm80 /" | cut -c1-200
f=$OUT/ncu_sdd_64_0.1_tf32
SPARSEKERN_BSR_TF32_COPIES=0 SPARSEKERN_BSR_SDD_DENSE=0 timeout $(cap 570) ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis_Tables --section LaunchStats --kernel-name regex:sdd --launch-skip 2 --launch-count 1 python3 $R/tools/diag/bsr_sdd_one.py 64 0.1 tf32 > $f.txt 2>&1
echo "== ncu sdd b=64 d=0.1 tf32 (new wheel)"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Registers Per|Warp Cycles Per Issued|bank|Grid Size|Achieved Occupancy" $f.txt | sed 's/  */ /g' | cut -c1-200 | head -16
echo "total $((SECONDS - T0))s"
