cd "$(dirname "$0")/../.."
R=$(pwd)
CUDA_FLAGS=-DSPARSEKERN_SM90_WATCHDOG STAGES="build" bash tools/device_check.sh > $OUT/run4.log 2>&1 || { tail -30 $OUT/run4.log; exit 1; }
(cd /tmp
for b in 128 64 32; do timeout 25 python3 $R/tools/diag/bsr_smoke.py $b bfloat16 dds 2>&1 | tail -3; done
timeout 100 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -x -k "cuda" 2>&1 | tail -4
timeout 70 python3 $R/tools/diag/bsr_profile.py bfloat16 2>&1 | grep -v -i warn | tee $OUT/bsr_profile.txt
) >> $OUT/run4.log 2>&1
timeout 330 bash tools/diag/semi2.sh > /dev/null 2>&1
grep -v "^$" $OUT/run4.log | tail -40
