#!/usr/bin/env bash
# Session 8, first call: build; the new register-tile backward's CUDA tests, then every kron CUDA
# test; memcheck of the new backward's tests; device times of the backward implementations.
source "$(dirname "$0")/lib.sh"
diag_begin
T=$R/tests/python
timeout $(cap 60) python3 -m pytest $T/test_kron.py -q -p no:cacheprovider -m cuda -k "backward_fast or backward_kernel_choice" > $OUT/new_tests.txt 2>&1
echo "new tests: $(tail -1 $OUT/new_tests.txt)"
grep -E "^FAILED|Error" $OUT/new_tests.txt | head -5
timeout $(cap 200) python3 $R/tools/diag/kron_bwd_fast.py $OUT/kron_bwd_fast.json > $OUT/kron_bwd_fast.txt 2>&1
cat $OUT/kron_bwd_fast.txt | cut -c1-250
diag_kron_cuda_tests 330
timeout $(cap 400) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py > $OUT/memcheck.txt 2>&1
echo "memcheck exit $?: $(grep -E "ERROR SUMMARY" $OUT/memcheck.txt | tail -1); $(grep -c ' ok$' $OUT/memcheck.txt) ok, $(grep -c WRONG $OUT/memcheck.txt) wrong"
timeout $(cap 440) compute-sanitizer --tool racecheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py small > $OUT/racecheck.txt 2>&1
echo "racecheck exit $?: $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/racecheck.txt | tail -1); $(grep -c ' ok$' $OUT/racecheck.txt) ok"
echo "total $((SECONDS - T0))s after build"
