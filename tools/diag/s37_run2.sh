#!/usr/bin/env bash
# Session 37, call 2: the kept-T0 backward's one-stage program with G1 over T0T and DT (DN loads
# during the previous tile's phase B; the G1 step covers the T0T / DT copies) against 3dbdf9c's
# wheel, alternated; then every kron CUDA test, memcheck and racecheck of the backward's check script.
source "$(dirname "$0")/lib.sh"
diag_kron_fast_ab_and_checks
echo "total $((SECONDS - T0))s"
