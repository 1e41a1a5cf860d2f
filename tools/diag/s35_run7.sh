#!/usr/bin/env bash
# Session 35, call 7: memcheck over the small-factor and register-tile backward check scripts with
# ec30e08's wheel (the 32-warp partial-∂ℓ/∂F reduction runs after each of their backwards).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 150) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_small_bwd_check.py > $OUT/memcheck_bwd.txt 2>&1
echo "small bwd memcheck exit $?: $(grep -E 'ERROR SUMMARY|cases ok|MISMATCH' $OUT/memcheck_bwd.txt | tr '\n' ' ' | cut -c1-300)"
timeout $(cap 280) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py > $OUT/memcheck_fast.txt 2>&1
echo "regtile bwd memcheck exit $?: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_fast.txt) $(grep -c ' ok$' $OUT/memcheck_fast.txt) ok $(grep -c WRONG $OUT/memcheck_fast.txt) wrong"
echo "total $((SECONDS - T0))s"
