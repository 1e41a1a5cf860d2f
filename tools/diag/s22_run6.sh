#!/usr/bin/env bash
# Session 22, call 6: where the TF32 backward of the cells still over 1.3 goes (b = 64 d = 0.25 /
# 0.5, b = 128 d = 0.1; kernel µs from the profiler), and cuBLAS's TF32 GEMM per operand layout at
# the weight gradient's shape (the dense path's dYᵀ · X reads M-major A and N-major B).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
BSR_PROFILE_KERNELS=1 BSR_PROFILE_BLOCKS=64 BSR_PROFILE_DENSITIES=0.25,0.5 timeout $(cap 200) python3 $R/tools/diag/bsr_profile.py tf32 2>&1 | grep -v Warn
BSR_PROFILE_KERNELS=1 BSR_PROFILE_BLOCKS=128 BSR_PROFILE_DENSITIES=0.1 timeout $(cap 260) python3 $R/tools/diag/bsr_profile.py tf32 2>&1 | grep -v Warn
cd $R/tools/diag && timeout $(cap 330) python3 tf32_gemm_layouts.py 2>&1 | grep -v Warn
echo "total $((SECONDS - T0))s"
