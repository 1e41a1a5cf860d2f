#!/usr/bin/env bash
# Session 21, call 3: split-K for the 16-bit sm_90a sdd (few blocks, long K). The new tests
# (split-K, its forced / off switch, the workspace fallback, CUDA-graph capture), the sm_90a sdd
# tests, then tools/diag/bsr_split_ab.py with SPARSEKERN_BSR_SDD_SPLIT=0 and auto alternating twice
# (same wheel), and compute-sanitizer memcheck + racecheck of the split tests.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 240 "split or graph_capture or sdd_tma_shapes or (test_sdd and not tf32 and not each)"
for round in 1 2; do
  for sp in 0 auto; do
    SPARSEKERN_BSR_SDD_SPLIT=$sp timeout $(cap 420) python3 $R/tools/diag/bsr_split_ab.py 2>&1 | grep -v Warn
  done
done
timeout $(cap 520) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "sdd_split_k and not 8192" > $OUT/san_memcheck.txt 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY' $OUT/san_memcheck.txt | tail -1) | $(tail -1 $OUT/san_memcheck.txt)"
SPARSEKERN_BSR_SDD_SPLIT=3 timeout $(cap 590) compute-sanitizer --tool racecheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "sdd_split_k and 1000 and bf16" > $OUT/san_racecheck.txt 2>&1
echo "racecheck: $(grep -E 'RACECHECK SUMMARY' $OUT/san_racecheck.txt | tail -1) | $(tail -1 $OUT/san_racecheck.txt)"
echo "total $((SECONDS - T0))s"
