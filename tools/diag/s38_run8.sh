#!/usr/bin/env bash
# Session 38, call 8: the final wheel (PDL forwards; uniform-shape small kernels: (8)^4 forward and
# backward, (16)^3 forward from 256 rows). Forward / kept backward µs against call 3's wheel
# (.whl312_old), alternated; every kron CUDA test; memcheck over the dependent-launch / capture
# tests; memcheck and racecheck of the small kernels' check scripts; `sparsekern check`; the kron
# bench of record.
source "$(dirname "$0")/lib.sh"
_times() {
  timeout $(cap 120) python3 $R/tools/diag/kron_fwd_times.py "1024 8,8,8,8" "1024 16,16,16" "64 16,16,16" "256 16,16,16" \
    "1024 4,4,4,4,4" --save
}
diag_ab_wheels _times
diag_kron_cuda_tests 200
diag_kron_memcheck_tests 260 "dependent_launch or cuda_graph_capture or forward_small"
diag_kron_small_sanitize_both 380
diag_check 430
diag_kron_bench 590
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt
echo "total $((SECONDS - T0))s"
