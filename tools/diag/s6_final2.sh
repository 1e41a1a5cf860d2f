#!/usr/bin/env bash
# Session 6, last call: build; every CUDA test (the tree as committed: grouped dds thresholds incl.
# tf32, LayerNorm ring, kron bench change); the issue-3 target bench (JSON + summary).
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
T0=$SECONDS
timeout 150 python3 -X faulthandler -m pytest $R/tests/python -q -p no:cacheprovider -m cuda > $OUT/cuda_tests.txt 2>&1
echo "cuda tests exit $?" >> $OUT/cuda_tests.txt
L=$(( 410 - (SECONDS - T0) )); [ $L -lt 30 ] && L=30
SPARSEKERN_BENCH_BSR=targets timeout $L python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > /tmp/bsr_bench.txt 2> /tmp/bsr_bench.err
echo "bsr bench exit $?"
python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1
grep -E "8192x4096" $OUT/bsr_summary.txt | cut -c1-130
tail -1 $OUT/bsr_summary.txt
grep -E "^FAILED|passed|failed|exit" $OUT/cuda_tests.txt | tail -8
echo "total $((SECONDS - T0))s after build"
