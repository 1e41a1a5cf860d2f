#!/usr/bin/env bash
# Session 37, call 10: the register-tile backward's split sums stored as 16-byte vectors
# (fb_grad_store) against the final wheel of calls 5-9 (alternated); every kron CUDA test, memcheck
# and racecheck of the backward's check script.
source "$(dirname "$0")/lib.sh"
diag_kron_fast_ab_and_checks
echo "total $((SECONDS - T0))s"
