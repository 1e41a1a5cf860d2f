#!/usr/bin/env bash
# Session 12, first call after s11_next.sh: the small-factor backward is now auto's choice for three
# or more factors. Every kron CUDA test; the backwards side by side (kron_bwd_small.py); where the
# small-factor backward's time goes (kron_bwd_parts.py, and ncu of 1024 × (8⊗8⊗8⊗8) and
# (16⊗16⊗16)); the full kron bench with FastKron's kernel times, and its summary.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 150
cd $R/tools/diag && timeout $(cap 230) python3 kron_bwd_small.py $OUT/kron_bwd_small.json
timeout $(cap 290) python3 kron_bwd_parts.py; cd /tmp
diag_ncu_kron_bwd 340 1024 8,8,8,8 small kron_small_bwd
diag_ncu_kron_bwd 390 1024 16,16,16 small kron_small_bwd
[ -d $R/.fastkron/pyfastkron ] && export PYTHONPATH=$R/.fastkron${PYTHONPATH:+:$PYTHONPATH}
diag_kron_bench 560
python3 -m sparsekern.bench.kron $OUT/kron.json
echo "total $((SECONDS - T0))s after install"
