#!/usr/bin/env bash
# Session 15, call 9: the grouped dds's TMA-store epilogue against its register epilogue
# (SPARSEKERN_BSR_TMA_STORE=0, now a runtime switch) and the one-column kernel, kernel µs in one
# run (tools/diag/bsr_epilogue.py; bf16 and fp16, b = 32 / 64 / 128), for the grouped kernel's
# density thresholds; the edge tests through the register epilogue.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
SPARSEKERN_BSR_TMA_STORE=0 SPARSEKERN_BSR_GROUPED=1 timeout $(cap 120) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "grouped_edges and not each_kernel" > $OUT/edges_regs.txt 2>&1; echo "edge tests, register epilogue: $(tail -1 $OUT/edges_regs.txt)"
BSR_EPI_DTYPES=bf16,fp16 BSR_EPI_BLOCKS=32,64,128 timeout $(cap 560) python3 $R/tools/diag/bsr_epilogue.py > $OUT/bsr_epilogue.txt 2>&1; echo "exit $?"
cat $OUT/bsr_epilogue.txt
echo "total $((SECONDS - T0))s after install"
