#!/usr/bin/env bash
# Session 36, call 8 (the session's final kron code): issue 5's bench (sparsekern bench --full
# --family kron) and its summary, then `sparsekern check` on the GPU while time is left.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_bench 420
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; tail -13 $OUT/kron_summary.txt
diag_check 560
echo "total $((SECONDS - T0))s"
