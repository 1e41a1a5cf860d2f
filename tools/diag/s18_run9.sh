#!/usr/bin/env bash
# Session 18, call 9 (wheel of a15b7d1, the session's final kron code): the issue-5 bench and its
# summary (sparsekern bench --full --family kron).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_bench 560
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt | grep -v FastKron
echo "total $((SECONDS - T0))s after install"
