#!/usr/bin/env bash
# Session 14, call 3 (wheel with both dense paths at their measured thresholds): every bsr CUDA
# test, compute-sanitizer memcheck over the dense-path tests, the sdd/dds kernel times under the
# default rule (auto) at 4096 -> 4096, and the issue-3 target bench with stk side by side.
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
diag_bsr_cuda_tests 150
timeout $(cap 260) compute-sanitizer --tool memcheck python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider \
  -m cuda -k "dense_path and (bfloat16 or tf32)" > $OUT/bsr_memcheck.txt 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY' $OUT/bsr_memcheck.txt | tail -1) | $(grep -E 'passed|failed' $OUT/bsr_memcheck.txt | tail -1)"
SDD_BLOCKS=32,64 SDD_DENSITIES=0.1,0.25,0.5 timeout $(cap 300) python3 $R/tools/diag/bsr_sdd_dense.py bfloat16 > $OUT/sdd_auto.txt 2>&1
grep -E "^mode" $OUT/sdd_auto.txt | cut -c1-110
diag_bsr_bench 590
tail -45 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after install"
