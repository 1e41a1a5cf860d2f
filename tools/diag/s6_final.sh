#!/usr/bin/env bash
# Session 6, final call: build; bsr + in-place CUDA tests (default kernel choice, the new
# use_grouped thresholds); the issue-3 target bench (JSON + summary); the kron bench with device
# times from CUDA graphs (JSON); the in-place bench again (JSON); memcheck over the LayerNorm
# tests (48 KB ring). Each step capped so the call ends within ~570 s. Summary lines last.
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
T0=$SECONDS
cap() { local c=$(( $1 - (SECONDS - T0) )); [ $c -lt 5 ] && c=5; echo $c; }  # seconds left until mark $1
T=$R/tests/python
timeout 70 python3 -m pytest $T/test_bsr.py $T/test_inplace.py -q -p no:cacheprovider -m cuda > $OUT/cuda_tests.txt 2>&1
echo "exit $?" >> $OUT/cuda_tests.txt
SPARSEKERN_BENCH_BSR=targets timeout $(cap 290) python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > /tmp/bsr_bench.txt 2> /tmp/bsr_bench.err
echo "bsr bench exit $?"
python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1
timeout $(cap 370) python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json > $OUT/kron_bench.txt 2>&1
echo "kron bench exit $?"
timeout $(cap 405) python3 -m sparsekern.cli bench --full --family inplace --json $OUT/inplace.json > /tmp/inplace_bench.txt 2>&1
echo "inplace bench exit $?"
timeout $(cap 440) compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest $T/test_inplace.py -q -p no:cacheprovider -m cuda -k "layer_norm" > $OUT/norm_memcheck.txt 2>&1
echo "exit $?" >> $OUT/norm_memcheck.txt
grep -E "layer_norm|rms_norm|softmax |square" /tmp/inplace_bench.txt | grep -v "^\[" | cut -c1-140 | head -12
grep -E "device_ms_error" $OUT/kron.json | head -2
grep -E "8192x4096" $OUT/bsr_summary.txt | cut -c1-130
tail -1 $OUT/bsr_summary.txt
for f in cuda_tests norm_memcheck; do echo "$f: $(grep -E "passed|failed|ERROR SUMMARY" $OUT/$f.txt | tail -2 | tr '\n' ' ') $(tail -1 $OUT/$f.txt)"; done
grep -E "^FAILED" $OUT/cuda_tests.txt | head -5
echo "total $((SECONDS - T0))s after build"
