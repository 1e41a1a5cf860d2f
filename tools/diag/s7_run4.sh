#!/usr/bin/env bash
# Session 7, call 4: build; the ∂ℓ/∂F GEMM formulations of kron's step-wise backward
# (kron_df_gemm.py); BlockSparseLinear b = 32 kernel breakdown, forward and backward, bf16
# (bsr_profile.py): which kernel makes b = 32's backward per FLOP 1.3-1.7x its forward.
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
timeout 120 python3 $R/tools/diag/kron_df_gemm.py > $OUT/kron_df_gemm.txt 2>&1
echo "kron_df_gemm exit $?"
BSR_PROFILE_BLOCKS=32 timeout 120 python3 $R/tools/diag/bsr_profile.py bfloat16 > $OUT/bsr_profile_b32.txt 2>&1
echo "bsr_profile exit $?"
cat $OUT/kron_df_gemm.txt | cut -c1-250
cut -c1-900 $OUT/bsr_profile_b32.txt
