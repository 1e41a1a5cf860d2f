#!/usr/bin/env bash
# Session 39, call 2: the final wheel (a4ddf96: constant copy trip counts in the uniform-shape small
# kernels, the uniform (16)^3 backward). Every kron CUDA test; memcheck over the dependent-launch,
# capture and small-kernel tests; `sparsekern check`; the kron bench of record.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 200
diag_kron_memcheck_tests 300 "dependent_launch or cuda_graph_capture or forward_small or backward_small"
diag_check 370
diag_kron_bench 590
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt
echo "total $((SECONDS - T0))s"
