#!/usr/bin/env bash
# Session 34, call 5 (1214261's wheel, an H100): issue 5's bench (sparsekern bench --full --family kron)
# and its summary, every kron CUDA test, then `sparsekern check` on the GPU while time is left.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_bench 380
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; tail -13 $OUT/kron_summary.txt
diag_kron_cuda_tests 500
diag_check 590
echo "total $((SECONDS - T0))s"
