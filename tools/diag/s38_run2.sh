#!/usr/bin/env bash
# Session 38, call 2: the ∂ℓ/∂F reduction also lets the kernel after it launch as its dependent
# (griddepcontrol.launch_dependents after its wait). Forward / kept backward µs, call 1's wheel
# (.whl312_old) against this one, alternated; every kron CUDA test; memcheck over the
# dependent-launch / capture tests; the kron bench of record.
source "$(dirname "$0")/lib.sh"
_times() {
  timeout $(cap 150) python3 $R/tools/diag/kron_fwd_times.py "1024 8,8,8,8" "1024 16,16,16" "1024 32,32" "16 32,32" \
    "1024 64,64" "4096 64,64" "128 32,32,32" --save
}
diag_ab_wheels _times
diag_kron_cuda_tests 200
diag_kron_memcheck_tests 260 "dependent_launch or cuda_graph_capture"
diag_kron_bench 560
cp $OUT/kron.json /tmp/kron.json 2>/dev/null; python3 -m sparsekern.bench.kron /tmp/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt
echo "total $((SECONDS - T0))s"
