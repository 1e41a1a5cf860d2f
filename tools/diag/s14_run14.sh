#!/usr/bin/env bash
# Session 14, call 14 (wheel with whole-block tiles for the tf32 sdd at b = 128): the bsr CUDA tests
# of sdd / tf32 / linear, memcheck of the sdd tf32 tests with whole blocks forced, and the kernel
# with 64-row tiles vs whole blocks (tools/diag/bsr_sdd_tm.py), the dense path off.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 120 "(sdd or tf32 or linear) and not each_kernel"
SPARSEKERN_BSR_SDD_TM=128 timeout $(cap 180) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda \
  -k "sdd_tf32_layouts or linear_tf32 or sdd_whole" > $OUT/tm128_tests.txt 2>&1; echo "TM=128 tests: $(tail -1 $OUT/tm128_tests.txt)"
SPARSEKERN_BSR_SDD_TM=128 timeout $(cap 260) compute-sanitizer --tool memcheck python3 -m pytest $R/tests/python/test_bsr.py -q \
  -p no:cacheprovider -m cuda -k "sdd_tf32_layouts and 128" > $OUT/tm128_memcheck.txt 2>&1
echo "memcheck TM=128: $(grep -E 'ERROR SUMMARY' $OUT/tm128_memcheck.txt | tail -1) | $(tail -1 $OUT/tm128_memcheck.txt)"
for tm in 64 128; do
  SPARSEKERN_BSR_SDD_TM=$tm SPARSEKERN_BSR_SDD_DENSE=0 timeout $(cap 420) python3 $R/tools/diag/bsr_sdd_tm.py 2>&1 | grep -E "^tm|Error" | tee -a $OUT/sdd_tm.txt
done
echo "total $((SECONDS - T0))s after install"
