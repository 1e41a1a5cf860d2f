# Final device run A: build, every CUDA test, memcheck of the kernels new this session, the bsr
# target bench (JSON), the in-place bench (JSON). Logs under $OUT; each step has a timeout.
cd "$(dirname "$0")/../.."
R=$(pwd)
export PYTHONUNBUFFERED=1
STAGES="build" bash tools/device_check.sh > $OUT/final_a.log 2>&1 || { tail -30 $OUT/final_a.log; exit 1; }
cd /tmp
{
echo "=== pytest -m cuda (all families) $(date +%T)"
timeout 170 python3 -X faulthandler -m pytest $R/tests/python -q -p no:cacheprovider -m cuda --junitxml=$OUT/junit-cuda.xml 2>&1 | tail -12
echo "=== memcheck: kernels new this session $(date +%T)"
timeout 100 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py $R/tests/python/test_inplace.py $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda \
   -k "many_tiles or (test_dds and (64 or 128)) or (test_sdd and (64 or 128)) or warp_row or backward_eager or eager_function" 2>&1 | grep -E "ERROR SUMMARY|passed|failed|Error" | tail -6
echo "=== bsr bench (targets grid) $(date +%T)"
SPARSEKERN_BENCH_BSR=targets timeout 230 python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > $OUT/bsr_bench.txt 2> $OUT/bsr_bench.err
echo "bench exit $?"; python3 -m sparsekern.bench.bsr $OUT/bsr.json 2>&1 | tee $OUT/bsr_summary.txt | tail -70
echo "=== inplace bench $(date +%T)"
timeout 100 python3 -m sparsekern.cli bench --full --family inplace --json $OUT/inplace.json 2>&1 | tail -32
echo "=== end $(date +%T)"
} >> $OUT/final_a.log 2>&1
grep -v "^$" $OUT/final_a.log | tail -150
