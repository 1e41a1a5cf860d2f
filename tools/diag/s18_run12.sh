#!/usr/bin/env bash
# Session 18, call 12: the natural split head's ∂ℓ/∂F as one pass over X and G (kron_head_f32.cu,
# work items of (row, column chunk) over up to 1024 blocks; call 11 ran one block per row: latency-bound)
# instead of cuBLAS's strided-batched GEMMs, against the wheel of a15b7d1, interleaved twice; the
# kernels of one backward; the kron CUDA tests; memcheck of the new pass (kron_head_grad_check.py).
source "$(dirname "$0")/lib.sh"
CASES=("128 32,32,32" "256 16,16,16,16" "256 8,8,8,8,8" "1024 8,8,8,8")
for round in 1 2; do
  for w in old new; do
    if [ $w = old ]; then
      python3 -m pip install -q --no-deps --no-index --force-reinstall $R/.whl312_old/sparsekern-*.whl > /tmp/inst.txt 2>&1 || { tail -3 /tmp/inst.txt; exit 1; }
    else
      diag_install_wheel > /dev/null
    fi
    [ $round = 1 ] && [ $w = old ] && { rm -f $OUT/*; diag_env; cd /tmp; diag_start; }
    echo "== round $round, $w wheel"
    timeout $(cap 200) python3 $R/tools/diag/kron_fwd_times.py "${CASES[@]}" --save
  done
done
timeout $(cap 240) python3 $R/tools/diag/kron_bwd_kernels.py "128 32,32,32" "256 16,16,16,16"
diag_kron_cuda_tests 320
timeout $(cap 420) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_head_grad_check.py > /tmp/san_m.txt 2>&1
echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san_m.txt) $(grep -E 'cases' /tmp/san_m.txt)"
echo "total $((SECONDS - T0))s"
