#!/usr/bin/env bash
# Session 14, call 4 (wheel with the dds dense path's scatter by block column, the sdd dense path's
# 256-byte alignment check and the cached workspace queries): the bsr CUDA tests of those paths,
# memcheck over the dds dense-path tests, and the forward / input-gradient kernel times with the dense
# path forced (=1) at blocks of 16 and 32 (bf16 and tf32, 4096 -> 4096, 8192 rows) against
# session 14's call 2.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 120 "(workspace or sdd or linear or dense) and not each_kernel"
timeout $(cap 200) compute-sanitizer --tool memcheck python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider \
  -m cuda -k "dds_dense_path or linear_dense" > $OUT/bsr_memcheck.txt 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY' $OUT/bsr_memcheck.txt | tail -1) | $(grep -E 'passed|failed' $OUT/bsr_memcheck.txt | tail -1)"
SPARSEKERN_BSR_DDS_DENSE=1 DDS_BLOCKS=16,32 DDS_SHAPES=4096x4096 DDS_ROWS=8192 timeout $(cap 300) \
  python3 $R/tools/diag/bsr_dds_dense.py bfloat16 tf32 > $OUT/dds_dense_forced.txt 2>&1
grep -E "^mode" $OUT/dds_dense_forced.txt | cut -c1-120
echo "total $((SECONDS - T0))s after install"
