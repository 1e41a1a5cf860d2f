#!/usr/bin/env bash
# Session 24, call 6 (wheel of a98f7e6: the natural split keeps its tail's T0, heads of 16 or 32 by
# 16 or 32 sum dF in the staged pass): every kron CUDA test, the issue-5 bench and its summary.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 200
diag_kron_bench 560
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt | grep -v FastKron
echo "total $((SECONDS - T0))s after install"
