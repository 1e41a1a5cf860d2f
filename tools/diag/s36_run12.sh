#!/usr/bin/env bash
# Session 36, call 12: the review commit (the backward's partial-sum stores and block reduction
# read the host-planned splits) against fc9a76b's wheel: A/B of the register-tile forward /
# backward, every kron CUDA test, memcheck and racecheck of the backward's check script.
source "$(dirname "$0")/lib.sh"
diag_kron_fast_ab_and_checks
echo "total $((SECONDS - T0))s"
