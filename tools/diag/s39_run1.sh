#!/usr/bin/env bash
# Session 39, call 1: three wheels alternated twice (install, then the same script): .whl312_old
# (HEAD before the session), .whl312 (the uniform-shape small kernels with constant tile-copy trip
# counts and mode count, and the forward's store form fixed at compile time), .whl312_b16 (that,
# plus the uniform (16)^3 backward from 256 rows); forward and backward device µs
# (kron_bwd_times.py); then at the b16 wheel the small / natural kron CUDA tests and memcheck /
# racecheck of both small-kernel check scripts.
source "$(dirname "$0")/lib.sh"
rm -f $OUT/*; diag_env; cd /tmp; diag_start
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
_times() { (cd $R/tools/diag && timeout $(cap 330) python3 kron_bwd_times.py "1024 16,16,16" "4096 16,16,16" "256 16,16,16" \
  "64 16,16,16" "1024 8,8,8,8" "4096 8,8,8,8" "1024 16,8,8" "256 16,16,16,16"); }
diag_ab_wheel_list "old new b16" _times
python3 -m pip install -q --no-deps --no-index --force-reinstall $R/.whl312_b16/sparsekern-*.whl > /tmp/inst.txt 2>&1
echo "== checks at the b16 wheel"
diag_kron_small_natural_tests 420
diag_kron_small_sanitize_both 570
echo "total $((SECONDS - T0))s"
