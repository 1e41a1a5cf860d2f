# Device run 5: build, CUDA tests of bsr/inplace/kron, memcheck of the new kernels, in-place target
# shapes, kron bench, bsr kernel profile. Logs under $OUT.
cd "$(dirname "$0")/../.."
R=$(pwd)
export PYTHONUNBUFFERED=1
STAGES="build" bash tools/device_check.sh > $OUT/run5.log 2>&1 || { tail -30 $OUT/run5.log; exit 1; }
cd /tmp
{
echo "=== pytest CUDA bsr/inplace/kron $(date +%T)"
timeout 200 python3 -m pytest $R/tests/python/test_bsr.py $R/tests/python/test_inplace.py $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda 2>&1 | tail -15
echo "=== memcheck new kernels $(date +%T)"
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py $R/tests/python/test_inplace.py $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda \
   -k "many_tiles or (test_dds and 128) or (test_sdd and 64) or warp_row or backward_eager" 2>&1 | grep -E "ERROR SUMMARY|passed|failed|Error" | tail -6
echo "=== inplace target shapes (warp rows on) $(date +%T)"
SPARSEKERN_INPLACE_WARP_ROWS=1 timeout 60 python3 $R/tools/diag/inplace2.py 2>&1 | tail -40
echo "=== kron bench $(date +%T)"
timeout 90 python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json 2>&1 | tail -30
echo "=== bsr profile $(date +%T)"
timeout 60 python3 $R/tools/diag/bsr_profile.py bfloat16 2>&1 | grep -v -i warn
echo "=== end $(date +%T)"
} >> $OUT/run5.log 2>&1
grep -v "^$" $OUT/run5.log | tail -120
