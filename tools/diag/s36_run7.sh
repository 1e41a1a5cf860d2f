#!/usr/bin/env bash
# Session 36, call 7: as call 5, with the transposed factor copies from 16-byte loads (this commit), against
# 1848f75 again (call 2's faster forward, backward unchanged):
# device µs old/new/old/new of the plain and training forwards and the kept backward, then every
# kron CUDA test, memcheck and racecheck of the fast backward's check script at the new wheel.
source "$(dirname "$0")/lib.sh"
diag_kron_fast_ab_and_checks
echo "total $((SECONDS - T0))s"
