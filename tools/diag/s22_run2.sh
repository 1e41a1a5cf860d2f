#!/usr/bin/env bash
# Session 22, call 2: the SM80 sdd's split K with the auto rule set from call 1 (about five CTAs per
# SM): the sdd / split CUDA tests, memcheck of the split tests, and auto against unsplit (0),
# alternating twice, over the tf32 and 16-bit weight gradients that run the SM80 kernel.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 200 "sdd_split or sdd_tf32 or sdd_tma or workspace or graph_capture or sdd_group"
SPARSEKERN_BSR_SDD_DENSE=0 timeout $(cap 300) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest \
  $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "sdd_split_k_sm80 and not 8192" > $OUT/san_memcheck.txt 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY' $OUT/san_memcheck.txt | tail -1) | $(tail -1 $OUT/san_memcheck.txt)"
sweep() {
  BSR_DTYPE=tf32 SPARSEKERN_BSR_SDD_SPLIT=$1 timeout $(cap 560) python3 $R/tools/diag/bsr_split_ab.py \
    4096:4096:128:0.1 4096:4096:64:0.1 4096:4096:128:0.05 4096:4096:64:0.05 3072:768:128:0.1 768:3072:128:0.1 2>&1 | grep -v Warn
  BSR_DTYPE=bf16 SPARSEKERN_BSR_SDD_SPLIT=$1 timeout $(cap 560) python3 $R/tools/diag/bsr_split_ab.py \
    3072:768:32:0.1 768:3072:32:0.1 4096:4096:32:0.05 2>&1 | grep -v Warn
}
for sp in 0 auto 0 auto; do sweep $sp; done | tee $OUT/split_ab.txt
echo "total $((SECONDS - T0))s"
