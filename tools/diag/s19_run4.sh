#!/usr/bin/env bash
# Session 19, call 4: the register-tile forward and backward kernels specialised to one factor width
# (U = 32 or 64: each step compiled once instead of once per width) against the previous wheel,
# interleaved twice (forward, training forward, kept-T0 backward); the kron CUDA tests; memcheck and
# racecheck over the forward's plan variants and the backward's cases.
source "$(dirname "$0")/lib.sh"
CASES=("16 32,32" "1024 32,32" "1024 64,64" "2048 64,64" "4096 64,64" "128 32,32,32" "32 64,64")
ab() { timeout $(cap 200) python3 $R/tools/diag/kron_fwd_times.py "${CASES[@]}" --save; }
diag_ab_wheels ab
diag_kron_cuda_tests 400
timeout $(cap 450) compute-sanitizer --tool memcheck python3 $R/tools/diag/kron_race.py > /tmp/san_m.txt 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY|kron_race:' /tmp/san_m.txt | tr '\n' ' ')"
timeout $(cap 490) compute-sanitizer --tool racecheck python3 $R/tools/diag/kron_race.py > /tmp/san_r.txt 2>&1
echo "racecheck: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|kron_race:' /tmp/san_r.txt | tr '\n' ' ')"
diag_kron_bwd_sanitize 550 590
echo "total $((SECONDS - T0))s"
