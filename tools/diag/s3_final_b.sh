#!/usr/bin/env bash
# Session 3 final run, part B: memcheck failures by name, then the bsr target bench with stk side by
# side (a failing stk row is now recorded instead of ending the run). Logs and JSON under $OUT.
cd "$(dirname "$0")/../.."
R=$(pwd)
export PYTHONUNBUFFERED=1
STAGES="build" bash tools/device_check.sh > $OUT/build_step.log 2>&1 || { tail -30 $OUT/build_step.log; exit 1; }
python3 -m pip install -q --no-deps $R/.whl/stanford_stk-*.whl > /dev/null 2>&1; echo "stk install exit $?"
cd /tmp
{
echo "=== memcheck $(date +%T)"
timeout 100 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py $R/tests/python/test_inplace.py $R/tests/python/test_semi.py -q -p no:cacheprovider -m cuda \
   -k "warp_row or shifted or norm or fast_path or fast_checks or binding_reads or bad_index or many_tiles or (test_dds and 128) or semi" > $OUT/memcheck.log 2>&1
grep -E "ERROR SUMMARY|passed|failed|^FAILED|^E  " $OUT/memcheck.log | head -20
echo "=== bsr bench (targets grid, stk side by side) $(date +%T)"
SPARSEKERN_BENCH_BSR=targets timeout 250 python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > $OUT/bsr_bench.txt 2> $OUT/bsr_bench.err
echo "bench exit $?"; grep ERROR $OUT/bsr_bench.err | head -5; python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1; tail -60 $OUT/bsr_summary.txt
echo "=== end $(date +%T)"
} >> $OUT/final_b.log 2>&1
grep -v "^$" $OUT/final_b.log | tail -100
