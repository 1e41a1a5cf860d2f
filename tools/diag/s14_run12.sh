#!/usr/bin/env bash
# Session 14, call 12 (wheel with the fp32 dense dds path's bias added after a beta = 0 cuBLAS
# product): the bsr CUDA tests of the dense paths and linear layers, memcheck over the dds
# dense-path tests, and the tf32 dense path forced at blocks of 16 and 32 (forward with bias next
# to the input gradient without).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 120 "dense or linear"
timeout $(cap 200) compute-sanitizer --tool memcheck python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider \
  -m cuda -k "dds_dense_path and tf32 or linear_dense" > $OUT/bsr_memcheck.txt 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY' $OUT/bsr_memcheck.txt | tail -1) | $(grep -E 'passed|failed' $OUT/bsr_memcheck.txt | tail -1)"
SPARSEKERN_BSR_DDS_DENSE=1 DDS_BLOCKS=16,32 DDS_SHAPES=4096x4096 DDS_ROWS=8192 timeout $(cap 300) \
  python3 $R/tools/diag/bsr_dds_dense.py tf32 > $OUT/dds_dense_forced.txt 2>&1
grep -E "^mode|Error" $OUT/dds_dense_forced.txt | cut -c1-120
echo "total $((SECONDS - T0))s after install"
