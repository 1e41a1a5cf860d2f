#!/usr/bin/env bash
# Session 31, call 5: compute-sanitizer memcheck over eight threads calling every family at once on
# their own streams (tools/diag/s31_threads.py, one second each), at the final wheel.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
S31_SECONDS=1 timeout $(cap 240) compute-sanitizer --tool memcheck --print-limit 5 python3 $R/tools/diag/s31_threads.py > $OUT/threads_memcheck.txt 2>&1
grep -E "ERROR SUMMARY|calls|failures" $OUT/threads_memcheck.txt | tail -8
echo "total $((SECONDS - T0))s"
