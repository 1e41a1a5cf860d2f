#!/usr/bin/env bash
# Session 4, last device run: build; the main job's check on the GPU (the kron check fix); who holds
# the cuSPARSELt plans at exit, plain and under compute-sanitizer (tools/diag/semi_leak.py).
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
timeout 200 python3 -m sparsekern.cli check > $OUT/check.log 2>&1; echo "check exit $?"
grep -E "FAIL" $OUT/check.log | head; tail -1 $OUT/check.log
echo "=== semi_leak plain"
timeout 60 python3 $R/tools/diag/semi_leak.py 2>&1 | tail -12
echo "=== semi_leak under compute-sanitizer"
timeout 120 compute-sanitizer --tool memcheck --print-limit 3 python3 $R/tools/diag/semi_leak.py 2>&1 | tail -16
