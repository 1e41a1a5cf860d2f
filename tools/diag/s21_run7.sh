#!/usr/bin/env bash
# Session 21, call 7 (the final wheel): where the input gradient of small low-density layers goes
# (BERT-base 3072 -> 768 at d = 0.1: ~35 of the backward's 58 µs for an output that takes ~17 µs to
# write): tools/diag/bsr_dx_variants.py under each dds kernel choice, and bsr_split_ab.py once on
# graphtime.graph_time's stream argument (f3e6518).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R/tools/diag
for env in "" SPARSEKERN_BSR_GROUPED=0 SPARSEKERN_BSR_GROUPED=1 SPARSEKERN_BSR_SCHEDULE=heavy "SPARSEKERN_BSR_GROUPED=0 SPARSEKERN_BSR_SCHEDULE=heavy" SPARSEKERN_BSR_SM90=0; do
  env $env timeout $(cap 240) python3 bsr_dx_variants.py 2>&1 | grep -v Warn
done
timeout $(cap 300) python3 bsr_split_ab.py 3072:768:128:0.1 4096:4096:128:0.05 2>&1 | grep -v Warn
echo "total $((SECONDS - T0))s"
