#!/usr/bin/env bash
# Session 14, call 10: cProfile of the low-density backward's host time (tools/diag/bsr_bwd_cprofile.py),
# with and without the bias gradient.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 100) python3 $R/tools/diag/bsr_bwd_cprofile.py > $OUT/bwd_cprofile.txt 2>&1
BWD_BIAS=0 timeout $(cap 160) python3 $R/tools/diag/bsr_bwd_cprofile.py > $OUT/bwd_cprofile_nobias.txt 2>&1
grep -E "host|ncalls|tottime" -A24 $OUT/bwd_cprofile.txt | cut -c1-150 | head -34
grep -E "^host" $OUT/bwd_cprofile_nobias.txt
echo "total $((SECONDS - T0))s after install"
