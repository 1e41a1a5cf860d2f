#!/usr/bin/env bash
# Session 4: variants of the 16-bit block-row norm kernel (issue 4), one device call. Build with
# -DSPARSEKERN_NORM_VARIANTS, check each variant against the tests, time each at the target shapes
# (inplace2.py, SPARSEKERN_INPLACE_NORM_VARIANT=WxF), torch's in-place elementwise ceiling, ncu.
source "$(dirname "$0")/lib.sh"
VARIANTS=${VARIANTS:-"4x0 4x1 8x0 8x1 8x2 8x3 4x5 8x5"}  # (run s4-2 also had 16x0 16x2, since removed)
CUDA_FLAGS=-DSPARSEKERN_NORM_VARIANTS diag_build $OUT/build_step.log
cd /tmp
{
for v in $VARIANTS; do
  echo "=== variant $v: norm tests $(date +%T)"
  SPARSEKERN_INPLACE_NORM_VARIANT=$v timeout 60 python3 -m pytest $R/tests/python/test_inplace.py -q -p no:cacheprovider -m cuda -k "norm or warp_row" 2>&1 | tail -2
done
echo "=== ceilings $(date +%T)"
INPLACE2_OPS=norm INPLACE2_CEIL=1 INPLACE2_NORM_SHAPES=16384x4096 INPLACE2_TAG=ceil timeout 60 python3 $R/tools/diag/inplace2.py 2>&1 | grep -E "copy ceiling|torch"
for v in $VARIANTS; do
  echo "=== variant $v: timings $(date +%T)"
  SPARSEKERN_INPLACE_NORM_VARIANT=$v INPLACE2_OPS=norm INPLACE2_NORM_SHAPES=16384x4096,16384x2048,16384x3072 INPLACE2_TAG=v$v timeout 60 python3 $R/tools/diag/inplace2.py 2>&1 | grep -v "copy ceiling"
done
echo "=== ncu $(date +%T)"
for v in 4x0 ${NCU_VARIANT:-8x0}; do
SPARSEKERN_INPLACE_NORM_VARIANT=$v timeout 60 ncu --kernel-name regex:"norm_bulk" --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section InstructionStats --section WarpStateStats \
   python3 $R/tools/diag/ncu_rows.py > $OUT/ncu_$v.txt 2>&1
grep -E "Duration|DRAM Throughput|Executed Ipc A|Issue Slots Busy|Achieved Occupancy|Registers Per|Executed Instructions  |Stall|Warp Cycles Per Issued|No Eligible|Pipe" $OUT/ncu_$v.txt | head -24
done
echo "=== end $(date +%T)"
} >> $OUT/norms.log 2>&1
grep -v "^$" $OUT/norms.log | tail -150
