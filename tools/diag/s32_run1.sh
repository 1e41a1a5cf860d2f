#!/usr/bin/env bash
# Session 32, call 1: the grouped dds writing empty tiles directly (SPARSEKERN_BSR_EMPTY_TILES) and
# the 16-bit sdd on whole blocks of 128 (SPARSEKERN_BSR_SDD_TM=128), each against the previous
# path in alternating fresh processes; then the tests of both. Both changes were measured slower or
# equal and not committed (docs/PERF_NOTES.md, session 32): at HEAD SPARSEKERN_BSR_EMPTY_TILES does not
# exist and SPARSEKERN_BSR_SDD_TM moves only the tf32 sdd.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_copy_package
D=$R/tools/diag
cd $D
for round in 1 2; do
  for e in 0 1; do
    echo "== empty tiles direct=$e, round $round"
    SPARSEKERN_BSR_EMPTY_TILES=$e timeout $(cap 200) python3 bsr_bwd_parts.py bf16:3072:768:128:0.1 2>&1 | head -1
  done
done
for round in 1 2; do
  for tm in 64 128; do
    echo "== sdd tm=$tm, round $round"
    SPARSEKERN_BSR_SDD_TM=$tm timeout $(cap 330) python3 bsr_split_ab.py 3072:768:128:0.1 768:3072:128:0.1 \
      3072:768:128:0.5 4096:4096:128:0.05 4096:4096:128:0.1 1024:4096:128:0.1 2>&1 | tail -6
  done
done
echo "perf done $((SECONDS - T0))s"
cd /tmp
timeout $(cap 560) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda \
  -k "grouped_edges_each_kernel or empty_tiles or env_switch_checked or whole_block_tiles_each or sdd_split_k or sdd_tma_shapes or test_dds_grouped" > $OUT/tests.txt 2>&1
echo "tests: $(tail -1 $OUT/tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/tests.txt | head -8
echo "total $((SECONDS - T0))s"
