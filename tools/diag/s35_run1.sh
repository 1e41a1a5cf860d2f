#!/usr/bin/env bash
# Session 35, call 1: the small-factor kernels with 16 elements per thread and row (a 4096-wide row
# over 256 threads, twice the warps per tile) against the default 32, as selections in one process
# (kron_bwd_sel_times.py / kron_sel_times.py, alternated per round); then the small / natural CUDA
# tests and memcheck over kron_small_check.py and kron_small_bwd_check.py (both with elems=16 cases).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
BWD=("1024 8,8,8,8" "1024 16,16,16" "512 16,16,16" "2048 16,16,16" "4096 16,16,16" "4096 8,8,8,8"
     "1024 8,16,16" "1024 16,16,8" "1024 4,4,4,4,4" "1024 16,8,8" "256 16,16,16,16" "64 8,8,8,8,8")
(cd $R/tools/diag && timeout $(cap 260) python3 kron_bwd_sel_times.py "small;small:elems=16;small:threads=256,elems=16" 2 "${BWD[@]}")
(cd $R/tools/diag && timeout $(cap 330) python3 kron_sel_times.py --sel "auto;small:elems=16;small:threads=256,elems=16" --rounds 2 \
  "1024 8,8,8,8" "1024 16,16,16" "4096 16,16,16" "4096 8,8,8,8" "1024 16,8,8" "256 16,16,16,16")
diag_kron_small_natural_tests 450
diag_kron_small_sanitize 500 memcheck
timeout $(cap 560) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_small_bwd_check.py > $OUT/memcheck_bwd.txt 2>&1
echo "bwd memcheck exit $?: $(grep -E 'ERROR SUMMARY|cases ok|MISMATCH' $OUT/memcheck_bwd.txt | tr '\n' ' ' | cut -c1-300)"
echo "total $((SECONDS - T0))s"
