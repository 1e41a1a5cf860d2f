#!/usr/bin/env bash
# Session 7, call 5: build; bsr CUDA tests (sm_90a sdd for blocks of 32, pair mode); memcheck of
# the sdd tests; BlockSparseLinear b = 32 kernel breakdown (bsr_profile.py, bf16): the sdd kernel's
# time against call 4's SM80 kernel (H200: 125.6 / 237.5 / 592.2 / 1201.8 µs at d = 0.05 / 0.1 / 0.25 /
# 0.5), and against the SM80 kernel in the same run (SPARSEKERN_BSR_SM90=0).
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
T=$R/tests/python
timeout 150 python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda > $OUT/bsr_tests.txt 2>&1
echo "exit $?" >> $OUT/bsr_tests.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -k "sdd" > $OUT/sdd_memcheck.txt 2>&1
echo "exit $?" >> $OUT/sdd_memcheck.txt
BSR_PROFILE_BLOCKS=32 timeout 100 python3 $R/tools/diag/bsr_profile.py bfloat16 > $OUT/bsr_profile_b32.txt 2>&1
echo "bsr_profile exit $?"
# The same with the sm_90a kernels off (the SM80 sdd, and the SM80 dds): the A/B on one machine.
SPARSEKERN_BSR_SM90=0 BSR_PROFILE_BLOCKS=32 timeout 100 python3 $R/tools/diag/bsr_profile.py bfloat16 > $OUT/bsr_profile_b32_sm80.txt 2>&1
echo "bsr_profile (SPARSEKERN_BSR_SM90=0) exit $?"
nvidia-smi --query-gpu=name --format=csv,noheader
cut -c1-700 $OUT/bsr_profile_b32.txt | grep -v Warn
cut -c1-700 $OUT/bsr_profile_b32_sm80.txt | grep -v Warn
for f in bsr_tests sdd_memcheck; do echo "$f: $(grep -E "passed|failed|ERROR SUMMARY" $OUT/$f.txt | tail -2 | tr '\n' ' ') $(tail -1 $OUT/$f.txt)"; done
grep -E "^FAILED" $OUT/bsr_tests.txt $OUT/sdd_memcheck.txt | head -8
