#!/usr/bin/env bash
# Session 40, call 6: ncu of the uniform (16)^3 and (8)^4 small forwards at 1024 rows (sections and
# stall-sampled SASS) at the wheel of 52c351b (= b195f8b's library).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_ncu_kron_fwd 150 1024 16,16,16 small kron_small_kernel
diag_ncu_kron_fwd 300 1024 8,8,8,8 small kron_small_kernel
echo "total $((SECONDS - T0))s"
