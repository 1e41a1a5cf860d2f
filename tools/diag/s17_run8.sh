#!/usr/bin/env bash
# Session 17, call 8: the grouped edge tests with the every-block-mask pattern added (each mask's
# compile-time wgmma case), through every forced kernel/schedule (each_kernel), and under memcheck
# with the grouped kernel forced.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 240) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "grouped_edges" > $OUT/bsr_tests.txt 2>&1
echo "bsr grouped edge tests: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests.txt | head -5
SPARSEKERN_BSR_GROUPED=1 timeout $(cap 330) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "grouped_edges and not each_kernel" > $OUT/san_memcheck.txt 2>&1
echo "memcheck, grouped forced: $(grep -E 'ERROR SUMMARY' $OUT/san_memcheck.txt | tail -1) | $(tail -1 $OUT/san_memcheck.txt)"
echo "total $((SECONDS - T0))s after install"
