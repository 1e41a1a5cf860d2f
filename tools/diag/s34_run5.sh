#!/usr/bin/env bash
# Session 34, call 5 (1214261's wheel, an H100): issue 5's bench (sparsekern bench --full --family kron)
# and its summary, every kron CUDA test, then `sparsekern check` on the GPU while time is left.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_bench 380
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; tail -13 $OUT/kron_summary.txt
timeout $(cap 500) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda > $OUT/kron_tests.txt 2>&1
echo "kron cuda tests: $(tail -1 $OUT/kron_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/kron_tests.txt | head -8
timeout $(cap 590) python3 -m sparsekern.cli check > $OUT/check.txt 2>&1
echo "sparsekern check exit $?: $(tail -2 $OUT/check.txt | tr '\n' ' ')"
grep -iE "fail" $OUT/check.txt | head -5
echo "total $((SECONDS - T0))s"
