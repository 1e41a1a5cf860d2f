#!/usr/bin/env bash
# Session 3 (2026-11-22), final device run: build; every CUDA test; memcheck of what changed this
# session (in-place block-row norms, bsr host fast path, semi); BlockSparseLinear host time piece by
# piece; the in-place bench (JSON); the bsr target bench with stk side by side (JSON; stk wheel in
# .whl/, carried). Logs and JSON under $OUT; every step bounded by timeout.
cd "$(dirname "$0")/../.."
R=$(pwd)
export PYTHONUNBUFFERED=1
STAGES="build" bash tools/device_check.sh > $OUT/build_step.log 2>&1 || { tail -30 $OUT/build_step.log; exit 1; }
grep -E "build ok|matrix instr" $OUT/build_step.log
python3 -m pip install -q --no-deps $R/.whl/stanford_stk-*.whl > $OUT/stk_install.log 2>&1; echo "stk install exit $?"
cd /tmp
{
echo "=== pytest -m cuda (all families) $(date +%T)"
timeout 200 python3 -X faulthandler -m pytest $R/tests/python -q -p no:cacheprovider -m cuda --junitxml=$OUT/junit-cuda.xml 2>&1 | tail -6
echo "=== memcheck: in-place norms, bsr fast path + sm90, semi $(date +%T)"
timeout 100 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py $R/tests/python/test_inplace.py $R/tests/python/test_semi.py -q -p no:cacheprovider -m cuda \
   -k "warp_row or shifted or norm or fast_path or fast_checks or binding_reads or bad_index or many_tiles or (test_dds and 128) or semi" > $OUT/memcheck.log 2>&1
grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.log | tail -4
echo "=== bsr host time $(date +%T)"
timeout 40 python3 $R/tools/diag/bsr_host.py 64 bfloat16 2>&1 | head -14
echo "=== inplace bench $(date +%T)"
timeout 110 python3 -m sparsekern.cli bench --full --family inplace --json $OUT/inplace.json > $OUT/inplace_bench.txt 2>&1; echo "exit $?"
grep -E "softmax|norm" $OUT/inplace_bench.txt | head -30
echo "=== bsr bench (targets grid, stk side by side) $(date +%T)"
SPARSEKERN_BENCH_BSR=targets timeout 240 python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > $OUT/bsr_bench.txt 2> $OUT/bsr_bench.err
echo "bench exit $?"; python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1; tail -60 $OUT/bsr_summary.txt
echo "=== end $(date +%T)"
} >> $OUT/final.log 2>&1
grep -v "^$" $OUT/final.log | tail -150
