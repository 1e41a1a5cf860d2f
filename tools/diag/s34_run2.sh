#!/usr/bin/env bash
# Session 34, call 2: the small-factor kernels' final pass storing pairs of floats as one 8-byte store
# (G = 2: a 16-wide first factor) instead of two 4-byte ones (new wheel, .whl312) against 7c771ab's
# (.whl312_old), alternated old/new/old/new (kron_bwd_times.py: forward and backward device µs);
# then with the new wheel the small-factor / natural-split CUDA tests and memcheck over
# kron_small_check.py and kron_small_bwd_check.py.
source "$(dirname "$0")/lib.sh"
diag_kron_bwd_ab 300 "1024 16,16,16" "4096 16,16,16" "512 16,16,16" "2048 16,16,16" "1024 16,16,8" "1024 16,8,8" \
  "256 16,16,16,16" "1024 8,8,8,8" "1024 8,16,16"
diag_kron_small_tests 380
diag_kron_small_natural_tests 420
diag_kron_small_sanitize 480 memcheck
timeout $(cap 560) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_small_bwd_check.py > $OUT/memcheck_bwd.txt 2>&1
echo "bwd memcheck exit $?: $(grep -E 'ERROR SUMMARY|cases ok' $OUT/memcheck_bwd.txt | tr '\n' ' ' | cut -c1-200)"
echo "total $((SECONDS - T0))s"
