#!/usr/bin/env bash
# Session 38, call 3: the reduction's early trigger (call 2) dropped and the fused backwards back to
# plain launches (only the fp32 fused forwards and the reduction launch as dependents). Every kron
# CUDA test; memcheck over the dependent-launch / capture tests and the small forward's check
# script; `sparsekern check`; the kron bench of record; PDL off / on in one process.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 120
diag_kron_memcheck_tests 200 "dependent_launch or cuda_graph_capture"
timeout $(cap 280) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_small_check.py > /tmp/san_s.txt 2>&1
echo "memcheck (kron_small_check.py) exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san_s.txt | tail -1); $(tail -2 /tmp/san_s.txt | head -1)"
diag_kron_bench 420
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt
timeout $(cap 480) python3 $R/tools/diag/kron_pdl_ab.py 2 "1024 8,8,8,8" "1024 16,16,16" "1024 32,32" "1024 64,64" "16 32,32"
diag_check 570
echo "total $((SECONDS - T0))s"
