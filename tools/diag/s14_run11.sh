#!/usr/bin/env bash
# Session 14, call 11 (wheel at the final state: the dds workspace fallback to the tf32 block copies,
# the dense-path tests' shared setup, the diag scripts' shared timers): every bsr CUDA test, and
# each changed diag script once on a small grid.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 200
DDS_BLOCKS=32 DDS_DENSITIES=0.5 timeout $(cap 240) python3 $R/tools/diag/bsr_dds_dense.py bfloat16 2>&1 | grep -E "^mode|Error"
SDD_BLOCKS=32 SDD_DENSITIES=0.5 timeout $(cap 270) python3 $R/tools/diag/bsr_sdd_dense.py bfloat16 2>&1 | grep -E "^mode|Error"
KRON_SWEEP=64 timeout $(cap 300) python3 $R/tools/diag/kron_fwd_sweep.py 2>&1 | grep -E "auto|Error" | head -4
echo "total $((SECONDS - T0))s after install"
