#!/usr/bin/env bash
# Session 35, call 5: the contraction passes with blocks fastest across a warp's lanes (the lanes of
# one slice read the same fibers: fewer distinct 16-byte chunks per warp load) and the block
# reduction's scratch laid out to match (new wheel, .whl312) against 8479c3b's (.whl312_old),
# alternated old/new/old/new (kron_bwd_times.py: forward and backward device µs); then with the
# new wheel the small-factor / natural CUDA tests and memcheck over kron_small_bwd_check.py.
source "$(dirname "$0")/lib.sh"
diag_kron_bwd_ab 240 "1024 8,8,8,8" "1024 16,16,16" "4096 8,8,8,8" "4096 16,16,16" "1024 4,4,4,4,4" \
  "1024 16,8,8" "1024 16,16,8" "256 16,16,16,16"
diag_kron_small_natural_tests 330
timeout $(cap 400) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_small_bwd_check.py > $OUT/memcheck_bwd.txt 2>&1
echo "bwd memcheck exit $?: $(grep -E 'ERROR SUMMARY|cases ok|MISMATCH' $OUT/memcheck_bwd.txt | tr '\n' ' ' | cut -c1-300)"
echo "total $((SECONDS - T0))s"
