#!/usr/bin/env bash
# Session 39, call 4: the final wheel (the chunked uniform passes, forward and (8)^4 backward)
# against a4ddf96's (.whl312_old), alternated twice; then every CUDA test file with `sparsekern
# check` beside them (five processes), memcheck over the kron dependent-launch / capture / small
# tests, and the kron bench of record.
source "$(dirname "$0")/lib.sh"
_times() { (cd $R/tools/diag && timeout $(cap 120) python3 kron_bwd_times.py "1024 16,16,16" "4096 16,16,16" "64 16,16,16" \
  "1024 8,8,8,8" "4096 8,8,8,8" "1024 16,8,8"); }
diag_ab_wheels _times
diag_all_cuda_tests_and_check 430
diag_kron_memcheck_tests 470 "dependent_launch or cuda_graph_capture or forward_small or backward_small"
diag_kron_bench 590
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt
echo "total $((SECONDS - T0))s"
