#!/usr/bin/env bash
# Session 17, call 3: the wheel with the grouped dds's per-mask wgmma issue (gdds_issue_blocks): the
# bsr dds CUDA tests, then memcheck and synccheck over the grouped edge and panel tests with the
# grouped kernel forced (blocks of 32 and 64 take the changed path).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 220) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "dds or grouped or panels" > $OUT/bsr_tests.txt 2>&1
echo "bsr cuda tests: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests.txt | head -5
for tool in memcheck synccheck; do
  SPARSEKERN_BSR_GROUPED=1 timeout $(cap 330) compute-sanitizer --tool $tool --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "panels_and_bias or (grouped_edges and not each_kernel)" > $OUT/san_$tool.txt 2>&1
  echo "$tool, grouped forced: $(grep -E 'ERROR SUMMARY' $OUT/san_$tool.txt | tail -1) | $(tail -1 $OUT/san_$tool.txt)"
done
echo "total $((SECONDS - T0))s after install"
