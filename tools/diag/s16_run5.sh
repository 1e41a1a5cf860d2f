#!/usr/bin/env bash
# Session 16, call 5 (wheel of the grouped dds with the bias loaded early, the chunked heaviest-first
# schedule and the column offsets in shared memory): the bsr CUDA tests, compute-sanitizer memcheck
# and synccheck over the grouped kernel's edge and panel tests (forced grouped, heavy-first), then
# the issue-3 target bench with stk.
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
diag_bsr_cuda_tests 200
K="grouped_edges or panels_and_bias or many_columns"
SPARSEKERN_BSR_GROUPED=1 SPARSEKERN_BSR_SCHEDULE=heavy timeout $(cap 290) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "($K) and not each_kernel" > $OUT/mc_grouped.txt 2>&1; echo "memcheck, grouped heavy: $(grep -E 'ERROR SUMMARY' $OUT/mc_grouped.txt | tail -1) | $(tail -1 $OUT/mc_grouped.txt)"
SPARSEKERN_BSR_GROUPED=1 SPARSEKERN_BSR_SCHEDULE=heavy timeout $(cap 350) compute-sanitizer --tool synccheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "(panels_and_bias or grouped_edges) and bfloat16 or panels_and_bias" > $OUT/sc_grouped.txt 2>&1; echo "synccheck, grouped heavy: $(grep -E 'ERROR SUMMARY' $OUT/sc_grouped.txt | tail -1) | $(tail -1 $OUT/sc_grouped.txt)"
diag_bsr_bench 590
tail -45 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after install"
