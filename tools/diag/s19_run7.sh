#!/usr/bin/env bash
# Session 19, call 7 (wheel of 14a1153: the backward specialised per factor width, XN and the next
# T0T copied behind arithmetic): the issue-5 bench and its summary, and every kron CUDA test.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 120
diag_kron_bench 560
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt | grep -v FastKron
echo "total $((SECONDS - T0))s after install"
