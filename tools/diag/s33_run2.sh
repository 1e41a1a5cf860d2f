#!/usr/bin/env bash
# Session 33, call 2 (same wheel as call 1): where the small-factor backward's time goes after
# e=16 (twice the threads) ran slower. ncu of the default backward (128 threads, e=32) at
# 1024 × (8⊗8⊗8⊗8) and (16⊗16⊗16): shared-memory wavefronts and bank conflicts, issue slots,
# stalls per SASS line; and of the forward at (8⊗8⊗8⊗8) for comparison.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_ncu_kron_bwd 200 1024 8,8,8,8 small kron_small_bwd
diag_ncu_kron_bwd 380 1024 16,16,16 small kron_small_bwd
diag_ncu_kron_fwd 520 1024 8,8,8,8 small kron_small_kernel
grep -E "Bank|bank|Shared|Wavefront" $OUT/ncu_bwd_1024_8x8x8x8_small.txt | sed 's/  */ /g' | cut -c1-200 | head -20
echo "total $((SECONDS - T0))s after install"
