#!/usr/bin/env bash
# Session 14, call 8 (wheel with the two-128-thread-block rule for the register-tile forward at
# p >= 32 with many tiles): every kron CUDA test, the (64 x 64) sweep again, and the issue-5 bench.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 240
KRON_SWEEP=64 timeout $(cap 300) python3 $R/tools/diag/kron_fwd_sweep.py 2>&1 | grep -E "auto|plan" | tee $OUT/kron_fwd_sweep.txt
diag_kron_bench 560
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; head -14 $OUT/kron_summary.txt
echo "total $((SECONDS - T0))s after install"
