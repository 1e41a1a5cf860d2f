#!/usr/bin/env bash
# Session 38, call 6: the small-factor forward's uniform-shape kernels ((8)^4 and (16)^3: passes
# unrolled, strides and row length compile-time) against the PDL wheel (.whl312_old), alternated;
# then the kron CUDA tests of the small kernels and memcheck / racecheck of kron_small_check.py.
source "$(dirname "$0")/lib.sh"
_times() {
  timeout $(cap 120) python3 $R/tools/diag/kron_fwd_times.py "1024 8,8,8,8" "1024 16,16,16" "4096 8,8,8,8" "64 16,16,16" \
    "1024 4,4,4,4,4" "1024 8,8,16,8"
}
diag_ab_wheels _times
diag_kron_small_natural_tests 200
timeout $(cap 300) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_small_check.py > /tmp/san_s.txt 2>&1
echo "memcheck (kron_small_check.py) exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san_s.txt | tail -1); $(grep -c ' ok' /tmp/san_s.txt) ok"
timeout $(cap 420) compute-sanitizer --tool racecheck --error-exitcode 3 python3 $R/tools/diag/kron_small_check.py > /tmp/san_r.txt 2>&1
echo "racecheck (kron_small_check.py) exit $?: $(grep -E 'RACECHECK SUMMARY' /tmp/san_r.txt | tail -1); $(grep -c ' ok' /tmp/san_r.txt) ok"
echo "total $((SECONDS - T0))s"
