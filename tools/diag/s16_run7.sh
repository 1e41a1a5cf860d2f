#!/usr/bin/env bash
# Session 16, call 7 (final code; call 6 ran every CUDA test at the same kernel with the column
# offsets still in shared memory): the bsr dds CUDA tests, memcheck over the new panel test through the
# forced grouped kernel under the heavy-first schedule, then the issue-3 target bench with stk.
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
timeout $(cap 200) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "dds or grouped or panels" > $OUT/bsr_tests.txt 2>&1
echo "bsr cuda tests: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests.txt | head -5
SPARSEKERN_BSR_GROUPED=1 SPARSEKERN_BSR_SCHEDULE=heavy timeout $(cap 250) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "panels_and_bias or (grouped_edges and bfloat16 and not each_kernel)" > $OUT/mc_grouped.txt 2>&1; echo "memcheck, grouped heavy: $(grep -E 'ERROR SUMMARY' $OUT/mc_grouped.txt | tail -1) | $(tail -1 $OUT/mc_grouped.txt)"
diag_bsr_bench 585
tail -45 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after install"
