#!/usr/bin/env bash
# Session 7, last call: build; every CUDA test (all families) on the final tree. Summary last.
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
timeout 400 python3 -m pytest $R/tests/python -q -p no:cacheprovider -m cuda > $OUT/cuda_tests_all.txt 2>&1
echo "exit $?" >> $OUT/cuda_tests_all.txt
grep -E "^FAILED" $OUT/cuda_tests_all.txt | head -8
echo "cuda tests (all families): $(grep -E "passed|failed" $OUT/cuda_tests_all.txt | tail -1) $(tail -1 $OUT/cuda_tests_all.txt)"
