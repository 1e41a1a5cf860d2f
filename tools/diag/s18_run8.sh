#!/usr/bin/env bash
# Session 18, call 8: the ∂ℓ/∂F reduction kernel with 32 warps per block instead of 8 (more of the
# L2-resident partials in flight) against the wheel of the commit before it, interleaved twice;
# also the kernels of one backward (kron_bwd_kernels.py); the kron CUDA
# tests; compute-sanitizer memcheck and racecheck of the backward (tools/diag/kron_bwd_fast_check.py).
source "$(dirname "$0")/lib.sh"
CASES=("16 32,32" "1024 32,32" "1024 64,64" "4096 64,64" "128 32,32,32" "1024 8,8,8,8" "1024 16,16,16" "256 16,16,16,16")
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
timeout $(cap 240) python3 $R/tools/diag/kron_bwd_kernels.py "1024 64,64" "4096 64,64" "1024 32,32" "1024 8,8,8,8" "1024 16,16,16"
diag_kron_cuda_tests 300
timeout $(cap 420) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py > /tmp/san_m.txt 2>&1
echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san_m.txt) $(grep -c ' ok$' /tmp/san_m.txt) ok $(grep -c WRONG /tmp/san_m.txt) wrong"
timeout $(cap 520) compute-sanitizer --tool racecheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py small > /tmp/san_r.txt 2>&1
echo "racecheck exit $?: $(grep -E 'RACECHECK SUMMARY' /tmp/san_r.txt) $(grep -c ' ok$' /tmp/san_r.txt) ok $(grep -c WRONG /tmp/san_r.txt) wrong"
echo "total $((SECONDS - T0))s"
