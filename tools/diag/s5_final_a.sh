#!/usr/bin/env bash
# Session 5, final call A: build (default configuration), every CUDA test (log under $OUT), the bsr
# grouped dds kernel times forced on and by default, the issue-3 target bench (JSON + summary under
# $OUT). The summary lines come last on stdout (the tool returns only the tail).
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
timeout 170 python3 -X faulthandler -m pytest $R/tests/python -q -p no:cacheprovider -m cuda > $OUT/cuda_tests.txt 2>&1
echo "cuda tests exit $?" >> $OUT/cuda_tests.txt
for g in 1 auto; do
  echo "=== bsr kernel times, SPARSEKERN_BSR_GROUPED=$g"
  if [ $g = auto ]; then unset SPARSEKERN_BSR_GROUPED; else export SPARSEKERN_BSR_GROUPED=$g; fi
  timeout 60 python3 $R/tools/diag/bsr_profile.py bfloat16 2>&1 | grep -E "^b=(32|64)|dense" | sed -E 's/ \| fwd: .*//'
done > $OUT/bsr_kernel_times.txt 2>&1
unset SPARSEKERN_BSR_GROUPED
SPARSEKERN_BENCH_BSR=targets timeout 230 python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > /tmp/bsr_bench.txt 2> /tmp/bsr_bench.err
echo "bsr bench exit $?"
python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1
cat $OUT/bsr_kernel_times.txt
grep -E "8192x4096" $OUT/bsr_summary.txt | cut -c1-130
tail -1 $OUT/bsr_summary.txt
grep -E "^FAILED|passed|failed|exit" $OUT/cuda_tests.txt | tail -12
