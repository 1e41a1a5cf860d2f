#!/usr/bin/env bash
# Session 10, sixth call: the small-factor forward per largest width, Gray-code order: kernel times,
# its CUDA tests, memcheck.
source "$(dirname "$0")/lib.sh"
diag_begin
for c in "1024 8,8,8,8 small" "1024 8,8,8,8 small:threads=256" "1024 16,16,16 small" "1024 16,16,16 small:threads=256" \
         "1024 32,32 small" "1024 32,32 new" "4096 8,8,8,8 small" "4096 16,16,16 small" "1024 8,16,32 small" "1024 8,16,32 new"; do
  set -- $c
  timeout $(cap 100) python3 $R/tools/diag/kron_fwd_one.py $1 $2 $3 --time
done
timeout $(cap 140) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "small or forward_kernels or kept_t0 or forward_kernel_choice" > $OUT/kron_small_tests.txt 2>&1
echo "kron small cuda tests: $(tail -1 $OUT/kron_small_tests.txt)"; grep -E "^FAILED" $OUT/kron_small_tests.txt | head -5
timeout $(cap 180) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_small_check.py > $OUT/memcheck_small.txt 2>&1
echo "memcheck exit $?: $(grep -E "ERROR SUMMARY" $OUT/memcheck_small.txt | tail -1); $(grep -c ' ok$' $OUT/memcheck_small.txt) ok, $(grep -c WRONG $OUT/memcheck_small.txt) wrong"
echo "total $((SECONDS - T0))s after build"
