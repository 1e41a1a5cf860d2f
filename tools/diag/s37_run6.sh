#!/usr/bin/env bash
# Session 37, call 6 (the session's kron code: f368a65 + 6e3f258): issue 5's bench (sparsekern
# bench --full --family kron) and its summary, `sparsekern check` on the GPU, and memcheck over
# the small-factor backward's check script (its "cases ok" line).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_bench 420
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; tail -13 $OUT/kron_summary.txt
diag_check 500
timeout $(cap 570) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_small_bwd_check.py > $OUT/memcheck_small_bwd.txt 2>&1
echo "memcheck (small backward) exit $?: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_small_bwd.txt | tail -1); $(grep 'cases ok' $OUT/memcheck_small_bwd.txt)"
echo "total $((SECONDS - T0))s"
