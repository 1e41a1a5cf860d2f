#!/usr/bin/env bash
# Session 8, fifth call: after cp.async copies in the generic fused kernels (kron_tile.h, fp32/fp64):
# kron CUDA tests, memcheck of generic and register-tile checks, forward old/new A/B, kron bench.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_cuda_tests 40
timeout $(cap 130) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_generic_check.py > $OUT/memcheck.txt 2>&1
echo "memcheck generic exit $?: $(grep -E "ERROR SUMMARY" $OUT/memcheck.txt | tail -1); $(grep -c ' ok$' $OUT/memcheck.txt) ok, $(grep -c WRONG $OUT/memcheck.txt) wrong"
timeout $(cap 200) compute-sanitizer --tool racecheck --error-exitcode 3 python3 $R/tools/diag/kron_generic_check.py > $OUT/racecheck.txt 2>&1
echo "racecheck generic exit $?: $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/racecheck.txt | tail -1); $(grep -c ' ok$' $OUT/racecheck.txt) ok"
timeout $(cap 300) python3 $R/tools/diag/kron_fwd_ab.py --quick > $OUT/kron_fwd_ab.txt 2>&1
grep -v "^ *$" $OUT/kron_fwd_ab.txt | cut -c1-200 | head -24
diag_kron_bench 540
echo "total $((SECONDS - T0))s after build"
