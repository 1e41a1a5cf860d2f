#!/usr/bin/env bash
# Session 5: the grouped sm_90a dds (blocks of 32/64, 16-bit): build, the bsr CUDA tests, a memcheck
# pass over the grouped kernel's tests, kernel-level forward/backward times with the grouped kernel
# on and off (SPARSEKERN_BSR_GROUPED=0), then the issue-3 target bench (JSON under $OUT).
#   run(command="OUT=$OUT bash tools/diag/s5_bsr.sh", carry=[".whl"])
source "$(dirname "$0")/lib.sh"
[ -n "$SKIP_BUILD" ] || diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
if [ -z "$SKIP_TESTS" ]; then
timeout 200 python3 -X faulthandler -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -x 2>&1 | tail -3
timeout 120 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "grouped_edges or many_tiles" > /tmp/memcheck_bsr.log 2>&1
echo "sanitizer exit $?"; grep -E "ERROR SUMMARY|passed|failed" /tmp/memcheck_bsr.log | tail -2
fi
for g in $EXTRA_TEST_SETTINGS; do
  echo "=== tests with SPARSEKERN_BSR_GROUPED=$g"
  SPARSEKERN_BSR_GROUPED=$g timeout 100 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "dds or linear" 2>&1 | tail -1
  SPARSEKERN_BSR_GROUPED=$g timeout 100 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "grouped_edges" 2>&1 | grep -E "ERROR SUMMARY|passed|failed" | tail -2
done
for g in ${GROUPED_SETTINGS-1 0}; do
  echo "=== kernel times, SPARSEKERN_BSR_GROUPED=$g"
  SPARSEKERN_BSR_GROUPED=$g timeout 120 python3 $R/tools/diag/bsr_profile.py bfloat16 float16 2>&1 | grep -v "b=128" | sed -E 's/ \| fwd: .*//'
done
if [ -n "$NCU" ]; then
  for g in $NCU; do
    for case in "${NCU_CASES:-32 0.5}"; do
      echo "=== ncu, SPARSEKERN_BSR_GROUPED=$g, b d = $case, bf16 forward"
      SPARSEKERN_BSR_GROUPED=$g timeout 150 ncu --kernel-name regex:dds_kernel --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section SourceCounters --import-source no \
        --export /tmp/ncu_$g --force-overwrite python3 $R/tools/diag/bsr_one.py $case bfloat16 > /tmp/ncu_$g.txt 2>&1
      grep -E "Duration|L2 Cache Throughput|Warp Cycles Per Issued" /tmp/ncu_$g.txt | sed -E 's/ +/ /g'
      ncu --import /tmp/ncu_$g.ncu-rep --page source --csv --print-source sass 2>/dev/null > /tmp/src_$g.csv
      python3 $R/tools/diag/ncu_stalls.py /tmp/src_$g.csv ${NCU_TOP:-14} 2>&1 | cut -c1-160
    done
  done
fi
if [ -z "$NO_BENCH" ]; then
  SPARSEKERN_BENCH_BSR=targets timeout 240 python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr-targets.json > /tmp/bsr_bench.txt 2> /tmp/bsr_bench.err
  echo "bench exit $?"; python3 -m sparsekern.bench.bsr $OUT/bsr-targets.json > $OUT/bsr_summary.txt 2>&1; tail -45 $OUT/bsr_summary.txt
fi
