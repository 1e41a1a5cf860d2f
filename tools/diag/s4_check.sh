#!/usr/bin/env bash
# Session 4: which row of `sparsekern check` fails on the GPU, and the semi memcheck summary.
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
timeout 200 python3 -m sparsekern.cli check > $OUT/check.log 2>&1; echo "check exit $?"
grep -E "FAIL|ERROR|Traceback|rror" $OUT/check.log | head -20; tail -2 $OUT/check.log
timeout 200 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_semi.py -q -p no:cacheprovider -m cuda \
   -k "semi and not leak" > /tmp/memcheck.log 2>&1
echo "sanitizer exit $?"; grep -E "ERROR SUMMARY|passed|failed" /tmp/memcheck.log | tail -3
