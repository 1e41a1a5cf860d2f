#!/usr/bin/env bash
# Session 18, call 3 (wheel of 192a2c2: the register-tile forward reading X in natural order): the
# issue-5 bench (sparsekern bench --full --family kron) and its summary.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_bench 560
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt | grep -v FastKron
echo "total $((SECONDS - T0))s after install"
