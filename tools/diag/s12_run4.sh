#!/usr/bin/env bash
# Session 12, fourth call: the natural-order forward split (modes 1 … n−1 by the small-factor or
# register-tile kernel over M·p0 rows, then mode 0 as one strided-batched GEMM). Every kron CUDA
# test; the split against the generic plan in the same run (kron_natural.py); the full kron bench
# and its summary.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 150
cd $R/tools/diag && timeout $(cap 230) python3 kron_natural.py; cd /tmp
export PYTHONPATH=$R/.fastkron${PYTHONPATH:+:$PYTHONPATH}
diag_kron_bench 520 > /tmp/bench_rows.txt; head -1 /tmp/bench_rows.txt
python3 -m sparsekern.bench.kron $OUT/kron.json | grep -v "^no FastKron"
echo "total $((SECONDS - T0))s after install"
