#!/usr/bin/env bash
# Session 39, call 3: three wheels alternated twice: .whl312_old (a4ddf96), .whl312_chunk (the
# uniform-shape passes summing and writing their outputs four j at a time: 112 instead of 128
# registers), .whl312 (that, with the uniform 128-thread forward compiled for six blocks per SM:
# 80 registers); forward and backward device µs. Then at the new wheel the forward with 4 / 5 / 6
# blocks per SM (grid overrides of 528 / 660 / 792 on the H200's 132 SMs), the small / natural kron
# CUDA tests, memcheck / racecheck of both small-kernel check scripts.
source "$(dirname "$0")/lib.sh"
rm -f $OUT/*; diag_env; cd /tmp; diag_start
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
_times() { (cd $R/tools/diag && timeout $(cap 250) python3 kron_bwd_times.py "1024 16,16,16" "4096 16,16,16" "256 16,16,16" \
  "1024 8,8,8,8" "4096 8,8,8,8" "256 16,16,16,16"); }
diag_ab_wheel_list "old chunk new" _times
echo "== blocks per SM at the new wheel ($((SECONDS - T0))s)"
(cd $R/tools/diag && timeout $(cap 360) python3 kron_sel_times.py --sel "small;small:grid=660;small:grid=792" --rounds 2 \
  "1024 16,16,16" "4096 16,16,16" "512 16,16,16" "1024 8,8,8,8" "4096 8,8,8,8" "256 8,8,8,8")
echo "== checks at the new wheel"
diag_kron_small_natural_tests 430
diag_kron_small_sanitize_both 580
echo "total $((SECONDS - T0))s"
