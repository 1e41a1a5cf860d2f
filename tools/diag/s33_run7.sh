#!/usr/bin/env bash
# Session 33, call 7: the small-factor passes (kron_small.h: small_pass_io, forward and backward)
# with the input chunk k outermost (all outputs' chains advance together) — new wheel, .whl312 —
# against d3a9965's (.whl312_old), alternated old/new/old/new (kron_bwd_times.py: forward and
# backward); then with the new wheel the kron small-factor and natural-split CUDA tests.
source "$(dirname "$0")/lib.sh"
CASES=("1024 8,8,8,8" "1024 16,16,16" "4096 8,8,8,8" "4096 16,16,16" "1024 4,4,4,4,4" "1024 16,8,8"
       "256 16,16,16,16" "64 8,8,8,8,8")
times() { (cd $R/tools/diag && timeout $(cap 200) python3 kron_bwd_times.py "${CASES[@]}"); }
diag_ab_wheels times
timeout $(cap 240) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "small or natural" \
  > $OUT/kron_small_tests.txt 2>&1
echo "kron small/natural cuda tests: $(tail -1 $OUT/kron_small_tests.txt)"
grep -E "^FAILED" $OUT/kron_small_tests.txt | head -5
echo "total $((SECONDS - T0))s"
