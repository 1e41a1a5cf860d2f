#!/usr/bin/env bash
# Session 6, call 6: build; the grouped sm_90a dds in tf32 (blocks of 64, Bop = Sᵀ): bsr CUDA tests
# by default and forced grouped, memcheck over the tf32 grouped edge tests, tf32 kernel times
# grouped vs one-column; then the bsr target bench (JSON + summary) if time is left.
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
T0=$SECONDS
cap() { local c=$(( $1 - (SECONDS - T0) )); [ $c -lt 5 ] && c=5; echo $c; }
T=$R/tests/python
SPARSEKERN_BSR_GROUPED=1 timeout 90 python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -x > $OUT/bsr_tests_grouped.txt 2>&1
echo "exit $?" >> $OUT/bsr_tests_grouped.txt
timeout 90 python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda > $OUT/bsr_tests.txt 2>&1
echo "exit $?" >> $OUT/bsr_tests.txt
SPARSEKERN_BSR_GROUPED=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -k "grouped_edges_tf32" > $OUT/bsr_memcheck.txt 2>&1
echo "exit $?" >> $OUT/bsr_memcheck.txt
for g in 1 0; do
  echo "=== tf32 bsr kernel times, SPARSEKERN_BSR_GROUPED=$g"
  SPARSEKERN_BSR_GROUPED=$g timeout 60 python3 $R/tools/diag/bsr_profile.py tf32 2>&1 | grep -E "^b=64|dense" | sed -E 's/ \| fwd: .*//'
done > $OUT/bsr_kernel_times_tf32.txt 2>&1
SPARSEKERN_BENCH_BSR=targets timeout $(cap 420) python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > /tmp/bsr_bench.txt 2> /tmp/bsr_bench.err
echo "bsr bench exit $?"
python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1
grep -E "8192x4096" $OUT/bsr_summary.txt | cut -c1-130
tail -1 $OUT/bsr_summary.txt
cat $OUT/bsr_kernel_times_tf32.txt
for f in bsr_tests_grouped bsr_tests bsr_memcheck; do echo "$f: $(grep -E "passed|failed|ERROR SUMMARY" $OUT/$f.txt | tail -2 | tr '\n' ' ') $(tail -1 $OUT/$f.txt)"; done
grep -hE "^FAILED" $OUT/bsr_tests*.txt | head -5
echo "total $((SECONDS - T0))s after build"
