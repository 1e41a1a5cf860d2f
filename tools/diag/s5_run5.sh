#!/usr/bin/env bash
# Session 5, device call 5: build (norm variants compiled in), every CUDA test, the grouped bsr dds
# kernel times on/off, then tools/diag/s5_norm.sh (lean 16-bit norm kernel vs the old defaults).
source "$(dirname "$0")/lib.sh"
CUDA_FLAGS=-DSPARSEKERN_NORM_VARIANTS diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
echo "=== all CUDA tests $(date +%T)"
timeout 170 python3 -X faulthandler -m pytest $R/tests/python -q -p no:cacheprovider -m cuda > /tmp/cuda_tests.log 2>&1
echo "exit $?"; grep -E "^FAILED|passed|failed|Timeout|Fatal" /tmp/cuda_tests.log | tail -12
for g in 1 0; do
  echo "=== bsr kernel times, SPARSEKERN_BSR_GROUPED=$g $(date +%T)"
  SPARSEKERN_BSR_GROUPED=$g timeout 75 python3 $R/tools/diag/bsr_profile.py bfloat16 2>&1 | grep -E "^b=(32|64)|dense" | sed -E 's/ \| fwd: .*//'
done
echo "=== norms $(date +%T)"
OUT=$OUT BUDGET=140 bash $R/tools/diag/s5_norm.sh
