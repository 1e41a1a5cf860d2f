#!/usr/bin/env bash
# Session 32, call 4: the sm_90a sdd with each tile walking its k-steps from a rotation set by its
# block (SPARSEKERN_BSR_SDD_ROTATE=1) against in order (0), alternating in fresh processes: the sdd
# alone, the layer backward and forward (bsr_split_ab.py), the BERT-base backward's parts
# (bsr_bwd_parts.py); then the sdd tests with the rotation on.
# Not kept (docs/PERF_NOTES.md, session 32): at HEAD SPARSEKERN_BSR_SDD_ROTATE does not exist.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_copy_package
cd $R/tools/diag
for round in 1 2; do
  for r in 0 1; do
    echo "== rotate=$r, round $round"
    SPARSEKERN_BSR_SDD_ROTATE=$r timeout $(cap 300) python3 bsr_split_ab.py 3072:768:128:0.1 768:3072:128:0.1 \
      3072:768:128:0.5 4096:4096:128:0.05 4096:4096:128:0.1 1024:4096:128:0.1 4096:4096:64:0.05 2>&1 | tail -7 | cut -c1-150
    SPARSEKERN_BSR_SDD_ROTATE=$r timeout $(cap 300) python3 bsr_bwd_parts.py bf16:3072:768:128:0.1 2>&1 | head -1
  done
done
echo "perf done $((SECONDS - T0))s"
cd /tmp
SPARSEKERN_BSR_SDD_ROTATE=1 timeout $(cap 560) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda \
  -k "sdd_split_k or sdd_tma_shapes or sdd_tf32_layouts or test_sdd or linear_backward or backward_against_reference" > $OUT/tests.txt 2>&1
echo "tests (rotate=1): $(tail -1 $OUT/tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/tests.txt | head -8
echo "total $((SECONDS - T0))s"
