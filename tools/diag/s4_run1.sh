#!/usr/bin/env bash
# Session 4 (2026-11-22), first device run: build; every CUDA test (verifies session 3's review
# commits and the merged kronbwd branch); memcheck of the semi leak test and the new kron steps
# backward; the kron steps backward timed against the fused one (issue 5); the in-place bench
# (baseline for this session's norm work) and an ncu look at the 16-bit LayerNorm kernels.
source "$(dirname "$0")/lib.sh"
diag_build $OUT/build_step.log
cd /tmp
{
echo "=== pytest -m cuda (all families) $(date +%T)"
timeout 200 python3 -X faulthandler -m pytest $R/tests/python -q -p no:cacheprovider -m cuda --junitxml=$OUT/junit-cuda.xml 2>&1 | tail -8
echo "=== kron CUDA tests with SPARSEKERN_KRON_BWD=steps $(date +%T)"
SPARSEKERN_KRON_BWD=steps timeout 100 python3 -m pytest $R/tests/python/test_kron.py -q -m cuda -p no:cacheprovider 2>&1 | tail -4
echo "=== memcheck: kron steps, semi leak test $(date +%T)"
SPARSEKERN_KRON_BWD=steps timeout 90 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_kron.py $R/tests/python/test_semi.py -q -p no:cacheprovider -m cuda \
   -k "steps or grad or leak" > $OUT/memcheck.log 2>&1
grep -E "ERROR SUMMARY|passed|failed|FAILED|leak" $OUT/memcheck.log | tail -12
echo "=== kron steps timings (TF32 off) $(date +%T)"
timeout 150 python3 $R/tools/diag/kron_bwd_steps.py cuda --split 8,32 --json $OUT/kron_bwd_steps.json > $OUT/kron_bwd_steps.log 2>&1; echo "exit $?"
tail -45 $OUT/kron_bwd_steps.log
echo "=== inplace bench $(date +%T)"
timeout 110 python3 -m sparsekern.cli bench --full --family inplace --json $OUT/inplace.json > $OUT/inplace_bench.txt 2>&1; echo "exit $?"
grep -E "softmax|norm|copy" $OUT/inplace_bench.txt | head -30
echo "=== ncu 16-bit LayerNorm $(date +%T)"
timeout 90 ncu --kernel-name regex:"norm" --launch-skip 1 --launch-count 2 --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section WarpStateStats \
   python3 $R/tools/diag/ncu_rows.py > $OUT/ncu.txt 2>&1; echo "exit $?"
grep -E "^  [a-z_].*norm|Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Shared Memory Config|Block Size|Grid Size|Stall|Block Limit" $OUT/ncu.txt | head -60
echo "=== end $(date +%T)"
} >> $OUT/run1.log 2>&1
grep -v "^$" $OUT/run1.log | tail -170
