#!/usr/bin/env bash
# Session 15, call 8: the grouped dds (16-bit) storing its tiles through shared memory and TMA
# (gdds_sm90.cuh: the consumers go on to the next tile's MMAs while the store drains), after call
# 6-7's ncu put its per-tile cost, not L2 traffic, between it and cuBLAS. The grouped kernel's edge
# tests through every kernel / schedule (subprocesses) and under memcheck, the bsr CUDA tests of
# dds / linear layers, then the issue-3 target bench (stk side by side).
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
timeout $(cap 200) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "grouped_edges" > $OUT/edges.txt 2>&1; echo "grouped edge tests: $(tail -1 $OUT/edges.txt)"; grep -E "^FAILED|Error" $OUT/edges.txt | head -5
SPARSEKERN_BSR_GROUPED=1 timeout $(cap 320) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "grouped_edges and not each_kernel" > $OUT/edges_memcheck.txt 2>&1; echo "memcheck: $(grep -E 'ERROR SUMMARY' $OUT/edges_memcheck.txt | tail -1) $(tail -1 $OUT/edges_memcheck.txt)"
diag_bsr_cuda_tests 420 "(dds or linear) and not each_kernel"
diag_bsr_bench 590
tail -45 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after install"
