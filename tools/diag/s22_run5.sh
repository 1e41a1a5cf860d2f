#!/usr/bin/env bash
# Session 22, call 5: compute-sanitizer racecheck (shared-memory hazards) and memcheck of the SM80
# sdd's split K: test_sdd_split_k_sm80 at K = 1000 (a short last split), and the layer's captured
# forward + backward with three forced splits.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
SPARSEKERN_BSR_SDD_DENSE=0 timeout $(cap 250) compute-sanitizer --tool racecheck --print-limit 5 python3 -m pytest \
  $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "sdd_split_k_sm80 and 1000" > $OUT/san_racecheck.txt 2>&1
echo "racecheck: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $OUT/san_racecheck.txt | tail -1) | $(tail -1 $OUT/san_racecheck.txt)"
SPARSEKERN_BSR_SDD_SPLIT=3 SPARSEKERN_BSR_SDD_DENSE=0 timeout $(cap 420) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest \
  $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "graph_capture or sdd_tf32_layouts" > $OUT/san_memcheck3.txt 2>&1
echo "memcheck, 3 splits forced: $(grep -E 'ERROR SUMMARY' $OUT/san_memcheck3.txt | tail -1) | $(tail -1 $OUT/san_memcheck3.txt)"
echo "total $((SECONDS - T0))s"
