#!/usr/bin/env bash
# Session 33, call 7: the small-factor passes (kron_small.h: small_pass_io, forward and backward)
# with the input chunk k outermost (all outputs' chains advance together) — new wheel, .whl312 —
# against d3a9965's (.whl312_old), alternated old/new/old/new (kron_bwd_times.py: forward and
# backward); then with the new wheel the kron small-factor and natural-split CUDA tests.
source "$(dirname "$0")/lib.sh"
diag_kron_bwd_ab 200 "${KRON_BWD_CASES[@]}"
diag_kron_small_natural_tests 240
echo "total $((SECONDS - T0))s"
