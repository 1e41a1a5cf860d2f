#!/usr/bin/env bash
# Session 35, call 8: `sparsekern check` (every op on the GPU) at ec30e08's wheel, the session's
# final code (the 32-warp kron reduction came after call 4's check).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_check 220
echo "total $((SECONDS - T0))s"
