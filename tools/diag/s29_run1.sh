#!/usr/bin/env bash
# Session 29, call 1: every CUDA test at HEAD's wheel. Session 28's last three commits (semi's
# abandon threshold 090b2fb, per-thread CPU scratch 9917266, hold() by value c282379) and this
# session's (whole-array checks of the in-place bindings, CPU scratch of bsr / kron emulation)
# had not run on a GPU: the bsr suite as two processes, kron, and the other files as a fourth.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
# This tree's Python package over the wheel's (the wheel carries the native module of 65748a9).
SP=$(python3 -c "import sparsekern,os;print(os.path.dirname(sparsekern.__file__))"); cp $R/python/sparsekern/*.py $SP/
diag_all_cuda_tests 560 test_bsr_edges.py
wait
diag_all_cuda_tests_report
grep -E "SKIPPED" $OUT/other_tests.txt | head -5
echo "total $((SECONDS - T0))s"
