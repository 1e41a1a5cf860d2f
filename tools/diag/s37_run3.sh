#!/usr/bin/env bash
# Session 37, call 3: the register-tile backward's k loops unrolled 8 deep with compile-time row
# strides where the widths fix them, against call 2's new wheel (alternated); then every kron
# CUDA test, memcheck and racecheck of the backward's check script.
source "$(dirname "$0")/lib.sh"
diag_kron_fast_ab_and_checks
echo "total $((SECONDS - T0))s"
