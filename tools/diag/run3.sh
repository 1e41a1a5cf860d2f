cd "$(dirname "$0")/../.."
R=$(pwd)
CUDA_FLAGS=-DSPARSEKERN_SM90_WATCHDOG STAGES="build" bash tools/device_check.sh || exit 1
grep -c HGMMA $OUT/sass.txt
cd /tmp
for b in 128 64 32; do for dt in bfloat16 float16; do for op in dds sdd; do
  timeout 25 python3 $R/tools/diag/bsr_smoke.py $b $dt $op 2>&1 | tail -3
done; done; done
timeout 150 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -x -k "cuda" 2>&1 | tail -8
timeout 80 python3 $R/tools/diag/bsr_profile.py bfloat16 2>&1 | grep -v Warn | tee $OUT/bsr_profile.txt
