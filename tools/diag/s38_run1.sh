#!/usr/bin/env bash
# Session 38, call 1: the fp32 fused kron kernels (register-tile and small-factor, forward and
# backward) launched as programmatic dependents (kron_launch.cuh). Forward / kept backward µs,
# session 37's wheel (.whl312_old: only the reduction dependent) against this one, alternated; then
# SPARSEKERN_KRON_PDL=0/1 in one process at the new wheel; every kron CUDA test; memcheck over the
# dependent-launch and capture tests and the small forward's / backward's check scripts.
source "$(dirname "$0")/lib.sh"
_times() {
  timeout $(cap 200) python3 $R/tools/diag/kron_fwd_times.py "1024 8,8,8,8" "1024 16,16,16" "1024 32,32" "16 32,32" \
    "1024 64,64" "4096 64,64" "128 32,32,32" "256 16,16,16,16" --save
}
diag_ab_wheels _times
timeout $(cap 300) python3 $R/tools/diag/kron_pdl_ab.py 2 "1024 8,8,8,8" "1024 16,16,16" "1024 32,32" "1024 64,64" "16 32,32"
diag_kron_cuda_tests 460
diag_kron_memcheck_tests 570 "dependent_launch or cuda_graph_capture"
grep -E "^FAILED|Error" /tmp/san_pdl.txt | head -5
echo "total $((SECONDS - T0))s"
