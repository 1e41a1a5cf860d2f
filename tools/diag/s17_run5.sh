#!/usr/bin/env bash
# Session 17, call 5: the wheel with the grouped dds's 256-row A box: the bsr dds CUDA tests and
# memcheck over the grouped edge and panel tests (grouped forced), the one-column vs grouped forward
# kernel time at blocks of 32 and 64 (where use_grouped switches).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 200) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "dds or grouped or panels" > $OUT/bsr_tests.txt 2>&1
echo "bsr cuda tests: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests.txt | head -5
SPARSEKERN_BSR_GROUPED=1 timeout $(cap 240) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "panels_and_bias or (grouped_edges and not each_kernel)" > $OUT/san_memcheck.txt 2>&1
echo "memcheck, grouped forced: $(grep -E 'ERROR SUMMARY' $OUT/san_memcheck.txt | tail -1) | $(tail -1 $OUT/san_memcheck.txt)"
for g in 0 1; do
  SPARSEKERN_BSR_GROUPED=$g PYTHONPATH=$R/tools/diag timeout $(cap 300) python3 $R/tools/diag/bsr_fwd_kernel_us.py "32:0.1,0.25,0.4,0.5 64:0.05,0.1" bfloat16,float16 2>&1 | tee -a $OUT/grouped_switch.txt
done
echo "total $((SECONDS - T0))s after install"
