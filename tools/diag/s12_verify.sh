#!/usr/bin/env bash
# Session 12, closing check on the GPU at the final state (wheel of tools/build_device_wheel.sh):
# every CUDA test of every family (not only kron's), the README's main job on the GPU
# (`sparsekern check` and the quick bench), and the two-factor register-tile backward's plan
# overrides on this H100 (kron_bwd_fast.py's sweep; session 8 chose the defaults on an H200).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 330) python3 -m pytest $R/tests/python -q -p no:cacheprovider -m cuda -x > $OUT/cuda_tests.txt 2>&1
echo "all cuda tests: $(tail -1 $OUT/cuda_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/cuda_tests.txt | head -5
timeout $(cap 420) sparsekern check --device cuda > $OUT/check.txt 2>&1; echo "check exit $?: $(tail -2 $OUT/check.txt | tr '\n' ' ')"
timeout $(cap 470) sparsekern bench --device cuda > $OUT/bench_quick.txt 2>&1; echo "quick bench exit $?"
cd $R/tools/diag && timeout $(cap 560) python3 kron_bwd_fast.py 2>&1 | grep -v Warning | tail -30; cd /tmp
echo "total $((SECONDS - T0))s after install"
