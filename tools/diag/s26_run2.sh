#!/usr/bin/env bash
# Session 26, call 2: both target benches at HEAD's wheel (no kernel changed since sessions 23 / 24;
# the Python entry points gained session 25's per-stream caches and autocast handling, so the eager
# rows are the ones to compare): the issue-3 bench with stk side by side, then the issue-5 bench.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_stk
diag_bsr_bench 420
head -3 $OUT/bsr_summary.txt; tail -4 $OUT/bsr_summary.txt
diag_kron_bench 585
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; tail -13 $OUT/kron_summary.txt
echo "total $((SECONDS - T0))s"
