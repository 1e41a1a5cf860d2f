#!/usr/bin/env bash
# Session 33, call 1 (wheel of the "small:e=16" backward, carried as .whl312): the kron CUDA
# tests of the small-factor backward (e=16 among them), memcheck and racecheck over e=16 cases,
# then the e=16 backward against the default, alternated in one process (kron_bwd_e16.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 200) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "small" \
  > $OUT/kron_small_tests.txt 2>&1
echo "kron small cuda tests: $(tail -1 $OUT/kron_small_tests.txt)"
grep -E "^FAILED" $OUT/kron_small_tests.txt | head -5
for tool in memcheck racecheck; do
  timeout $(cap 330) compute-sanitizer --tool $tool python3 $R/tools/diag/kron_bwd_e16_check.py > $OUT/san_$tool.txt 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|cases ok' $OUT/san_$tool.txt | tr '\n' ' ')"
done
cd $R/tools/diag && timeout $(cap 480) python3 kron_bwd_e16.py 3 $OUT/kron_bwd_e16.json > $OUT/kron_bwd_e16.txt 2>&1
cat $OUT/kron_bwd_e16.txt | cut -c1-230
echo "total $((SECONDS - T0))s after install"
