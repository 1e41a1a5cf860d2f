#!/usr/bin/env bash
# Session 18, call 12: the natural split head's ∂ℓ/∂F as one pass over X and G (kron_head_f32.cu,
# work items of (row, column chunk) over up to 1024 blocks; call 11 ran one block per row: latency-bound)
# instead of cuBLAS's strided-batched GEMMs, against the wheel of a15b7d1, interleaved twice; the
# kernels of one backward; the kron CUDA tests; memcheck of the new pass (kron_head_grad_check.py).
# The same procedure as s18_run11.sh (only the carried wheels differ):
exec bash "$(dirname "$0")/s18_run11.sh"
