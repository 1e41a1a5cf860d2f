#!/usr/bin/env bash
# Session 20, call 2 (wheel with the conflict-free tf32 fragment loads): every bsr CUDA test
# (test_sdd_wgmma_each included), compute-sanitizer memcheck and racecheck of the tf32 SM80 kernels
# (copies withheld, dense path off), and the layers' kernel times in tf32 (BlockSparseLinear
# forward and backward at 8192 x 4096 -> 4096, tools/diag/bsr_profile.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 280
K="(sdd_tf32_layouts and 64) or (test_sdd and tf32 and not each) or (test_dsd and tf32) or (test_dds and tf32)"
SPARSEKERN_BSR_TF32_COPIES=0 SPARSEKERN_BSR_SDD_DENSE=0 timeout $(cap 380) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "$K" > $OUT/san_memcheck.txt 2>&1
echo "memcheck tf32 SM80: $(grep -E 'ERROR SUMMARY' $OUT/san_memcheck.txt | tail -1) | $(tail -1 $OUT/san_memcheck.txt)"
SPARSEKERN_BSR_TF32_COPIES=0 SPARSEKERN_BSR_SDD_DENSE=0 timeout $(cap 450) compute-sanitizer --tool racecheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "test_sdd and tf32 and not each and not layouts and (32 or 16)" > $OUT/san_racecheck.txt 2>&1
echo "racecheck tf32 sdd: $(grep -E 'RACECHECK SUMMARY' $OUT/san_racecheck.txt | tail -1) | $(tail -1 $OUT/san_racecheck.txt)"
BSR_PROFILE_KERNELS=1 timeout $(cap 580) python3 $R/tools/diag/bsr_profile.py tf32 2>&1 | grep -E "^b=|dense" | cut -c1-700
echo "total $((SECONDS - T0))s"
