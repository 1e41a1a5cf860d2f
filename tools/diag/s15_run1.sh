#!/usr/bin/env bash
# Session 15, call 1 (H100, wheel of bf46148, session 14's final main): every CUDA test of every
# family at that state (session 14 last ran them all at 92a956a), then the issue-5 bench on an
# H100 (session 14's ran on an H200; session 12's H100 bench predates the 128-thread rule).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 300) python3 -m pytest $R/tests/python -q -p no:cacheprovider -m cuda -x > $OUT/cuda_tests.txt 2>&1
echo "all cuda tests: $(tail -1 $OUT/cuda_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/cuda_tests.txt | head -5
diag_kron_bench 560
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt | grep -v FastKron
echo "total $((SECONDS - T0))s after install"
