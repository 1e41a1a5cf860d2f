#!/usr/bin/env bash
# Session 18, call 11: the natural split head's ∂ℓ/∂F as one pass over X and G (kron_head_f32.cu,
# first version: one block per row, latency-bound; call 12 has the kept one)
# instead of cuBLAS's strided-batched GEMMs, against the wheel of a15b7d1, interleaved twice; the
# kernels of one backward; the kron CUDA tests; memcheck of the new pass (kron_head_grad_check.py).
source "$(dirname "$0")/lib.sh"
CASES=("128 32,32,32" "256 16,16,16,16" "256 8,8,8,8,8" "1024 8,8,8,8")
ab_times() { timeout $(cap 200) python3 $R/tools/diag/kron_fwd_times.py "${CASES[@]}" --save; }
diag_ab_wheels ab_times
timeout $(cap 240) python3 $R/tools/diag/kron_bwd_kernels.py "128 32,32,32" "256 16,16,16,16"
diag_kron_cuda_tests 320
timeout $(cap 420) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_head_grad_check.py > /tmp/san_m.txt 2>&1
echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san_m.txt) $(grep -E 'cases' /tmp/san_m.txt)"
echo "total $((SECONDS - T0))s"
