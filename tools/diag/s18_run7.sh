#!/usr/bin/env bash
# Session 18, call 7: the register-tile backward with its transposed factor copies at pitch w + 4
# (conflict-free transposing writes) against call 6's wheel (626ae04 + an unrolled dF1 loop that
# measured equal, not kept), interleaved twice; the kron CUDA
# tests; compute-sanitizer memcheck and racecheck of the backward (tools/diag/kron_bwd_fast_check.py).
# The same procedure as s18_run4.sh (only the carried wheels differ):
exec bash "$(dirname "$0")/s18_run4.sh"
