#!/usr/bin/env bash
# Session 40, call 4: the issue-3 target bench with stk 0.7.1 side by side (built here from its
# PyPI sdist into .whl/) at the wheel of 52c351b (= d6f9f67's library), on an H200: the issue
# quotes its anchors on an H200, and the bsr bench of record was an H100's (session 27).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_stk
python3 -c "import stk, triton; print('stk', stk.__file__ is not None, 'triton', triton.__version__)"
diag_bsr_bench 560
head -3 $OUT/bsr_summary.txt; tail -4 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s"
