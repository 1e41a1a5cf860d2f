#!/usr/bin/env bash
# Session 12, final call: every kron CUDA test and the full kron bench (into $OUT/kron.json, the
# committed JSON) with its summary, at the session's final state (the natural split's backward now
# also taken over the shape rule's step-wise choice, kron.py: _natural_backward).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 150
cd $R/tools/diag && timeout $(cap 200) python3 kron_bwd_natural.py | grep -v "^   plan"; cd /tmp
export PYTHONPATH=$R/.fastkron${PYTHONPATH:+:$PYTHONPATH}
diag_kron_bench 520 > /tmp/bench_rows.txt; head -1 /tmp/bench_rows.txt
python3 -m sparsekern.bench.kron $OUT/kron.json | grep -v "^no FastKron"
echo "total $((SECONDS - T0))s after install"
