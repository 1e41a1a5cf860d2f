#!/usr/bin/env bash
# Session 18, call 2: the register-tile kron forward reading X in natural order (16-byte copies)
# against the previous wheel (4-byte copies into a transposed tile), interleaved twice; then the
# kron CUDA tests, compute-sanitizer over the forward's plan variants, and the new kernel's stalls.
source "$(dirname "$0")/lib.sh"
CASES=("16 32,32" "1024 32,32" "1024 64,64" "4096 64,64" "128 32,32,32" "32 128,128")
ab_times() { timeout $(cap 200) python3 $R/tools/diag/kron_fwd_times.py "${CASES[@]}" $([ $AB_ROUND = 2 ] && echo --save); }
diag_ab_wheels ab_times
diag_kron_cuda_tests 420
timeout $(cap 470) compute-sanitizer --tool memcheck python3 $R/tools/diag/kron_race.py > /tmp/san_m.txt 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY|kron_race:' /tmp/san_m.txt | tr '\n' ' ')"
timeout $(cap 510) compute-sanitizer --tool racecheck python3 $R/tools/diag/kron_race.py > /tmp/san_r.txt 2>&1
echo "racecheck: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|kron_race:' /tmp/san_r.txt | tr '\n' ' ')"
diag_ncu_kron_fwd 580 4096 64,64 auto "kron_fast"
echo "total $((SECONDS - T0))s"
