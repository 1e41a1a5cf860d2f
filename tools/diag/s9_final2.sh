#!/usr/bin/env bash
# Session 9, final call at the committed state (issue 3): bsr CUDA tests without the
# subprocess-per-kernel ones (those ran in s9_final.sh on the same kernels) plus one of them, and
# the issue-3 target bench with stk side by side (JSON + summary). Summary lines last.
source "$(dirname "$0")/lib.sh"
diag_begin
python3 -m pip install --no-deps --no-index -q $R/.whl/stanford_stk-*.whl > /tmp/stk_install.txt 2>&1 || tail -3 /tmp/stk_install.txt
T=$R/tests/python
timeout $(cap 110) python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -k "not each_kernel or one-column-heavy" > $OUT/bsr_tests.txt 2>&1
echo "bsr cuda tests: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED" $OUT/bsr_tests.txt | head -5
SPARSEKERN_BENCH_BSR=targets timeout $(cap 440) python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > /tmp/bsr_bench.txt 2> $OUT/bsr_bench_rows.txt
echo "bsr bench exit $?"
python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1
grep -E "ERROR" $OUT/bsr_bench_rows.txt | cut -c1-200 | head -4
cat $OUT/bsr_summary.txt | cut -c1-130
echo "total $((SECONDS - T0))s after build"
