# Final device run C: build, CUDA tests of bsr and semi, the bsr target bench (JSON), the default
# 2:4 path at 8192x4096->4096. Logs under $OUT.
cd "$(dirname "$0")/../.."
R=$(pwd)
export PYTHONUNBUFFERED=1
STAGES="build" bash tools/device_check.sh > $OUT/final_c.log 2>&1 || { tail -30 $OUT/final_c.log; exit 1; }
cd /tmp
{
echo "=== pytest -m cuda bsr + semi $(date +%T)"
timeout 90 python3 -X faulthandler -m pytest $R/tests/python/test_bsr.py $R/tests/python/test_semi.py -q -p no:cacheprovider -m cuda -rs 2>&1 | tail -12
echo "=== semi default settings, 8192x4096->4096 $(date +%T)"
for dt in fp16 bf16; do timeout 40 python3 $R/tools/diag/semi2_bench.py ours $dt 2>&1 | grep -E "ROW|chosen|Error" | cut -c1-400; done
echo "=== bsr bench (targets grid) $(date +%T)"
SPARSEKERN_BENCH_BSR=targets timeout 240 python3 -X faulthandler -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > $OUT/bsr_bench.txt 2> $OUT/bsr_bench.err
echo "bench exit $?"; tail -3 $OUT/bsr_bench.err
python3 -m sparsekern.bench.bsr $OUT/bsr.json 2>&1 | tee $OUT/bsr_summary.txt | tail -50
echo "=== end $(date +%T)"
} >> $OUT/final_c.log 2>&1
grep -v "^$" $OUT/final_c.log | tail -90
