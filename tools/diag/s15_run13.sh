#!/usr/bin/env bash
# Session 15, call 13 (final code, fae5750): compute-sanitizer memcheck and synccheck over the
# grouped dds's edge tests with the kernel forced (TMA-store epilogue) and memcheck with the
# register epilogue (SPARSEKERN_BSR_TMA_STORE=0), then BlockSparseLinear's tests under memcheck.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
K="grouped_edges and not each_kernel"
SPARSEKERN_BSR_GROUPED=1 timeout $(cap 150) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "$K" > $OUT/mc_tma.txt 2>&1; echo "memcheck, TMA store: $(grep -E 'ERROR SUMMARY' $OUT/mc_tma.txt | tail -1) | $(tail -1 $OUT/mc_tma.txt)"
SPARSEKERN_BSR_GROUPED=1 timeout $(cap 260) compute-sanitizer --tool synccheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "$K and bfloat16" > $OUT/sc_tma.txt 2>&1; echo "synccheck, TMA store: $(grep -E 'ERROR SUMMARY' $OUT/sc_tma.txt | tail -1) | $(tail -1 $OUT/sc_tma.txt)"
SPARSEKERN_BSR_GROUPED=1 SPARSEKERN_BSR_TMA_STORE=0 timeout $(cap 360) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "$K and bfloat16" > $OUT/mc_regs.txt 2>&1; echo "memcheck, registers: $(grep -E 'ERROR SUMMARY' $OUT/mc_regs.txt | tail -1) | $(tail -1 $OUT/mc_regs.txt)"
timeout $(cap 500) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "linear and not each_kernel and not subprocess" > $OUT/mc_linear.txt 2>&1; echo "memcheck, linear: $(grep -E 'ERROR SUMMARY' $OUT/mc_linear.txt | tail -1) | $(tail -1 $OUT/mc_linear.txt)"
echo "total $((SECONDS - T0))s after install"
