#!/usr/bin/env bash
# Session 24, call 4: the issue-5 bench (`sparsekern bench --full --family kron`) and its summary at
# 8e800ae (the natural split keeping its tail's T0, the staged head-gradient pass).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_bench 580
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt | grep -v FastKron
echo "total $((SECONDS - T0))s after install"
