#!/usr/bin/env bash
# Session 18, call 6: the register-tile backward with its swizzled ∂ℓ/∂F1 loop unrolled twice (the
# second half's loads overlap the first half's FFMAs) against the wheel of 626ae04, interleaved twice; the kron CUDA
# tests; compute-sanitizer memcheck and racecheck of the backward (tools/diag/kron_bwd_fast_check.py).
# The same procedure as s18_run4.sh (only the carried wheels differ):
exec bash "$(dirname "$0")/s18_run4.sh"
