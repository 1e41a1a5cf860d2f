#!/usr/bin/env bash
# Session 38, call 7: three wheels alternated twice (install, then the same script): .whl312_old
# (PDL forwards, generic small kernels), .whl312_ufwd (+ the small forward's uniform-shape kernels),
# .whl312 (+ the small backward's); forward µs over batch sizes (where the uniform kernel stops
# paying) and the kept backward µs; then the small / natural kron CUDA tests and memcheck /
# racecheck of kron_small_check.py and kron_small_bwd_check.py at the new wheel.
source "$(dirname "$0")/lib.sh"
rm -f $OUT/*; diag_env; cd /tmp; diag_start
for round in 1 2; do
  for w in old ufwd new; do
    d=$R/.whl312_$w; [ $w = new ] && d=$R/.whl312
    python3 -m pip install -q --no-deps --no-index --force-reinstall $d/sparsekern-*.whl > /tmp/inst.txt 2>&1 || { tail -3 /tmp/inst.txt; exit 1; }
    echo "== round $round, $w wheel"
    timeout $(cap 200) python3 $R/tools/diag/kron_fwd_times.py "16 16,16,16" "64 16,16,16" "128 16,16,16" "256 16,16,16" "512 16,16,16" \
      "1024 16,16,16" "16 8,8,8,8" "64 8,8,8,8" "128 8,8,8,8" "256 8,8,8,8" "1024 8,8,8,8"
    timeout $(cap 250) python3 $R/tools/diag/kron_fwd_times.py "1024 16,16,16" "1024 8,8,8,8" "4096 8,8,8,8" "64 16,16,16" "256 8,8,8,8" --save | sed 's/^/save: /'
  done
done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
diag_kron_small_natural_tests 320
diag_kron_small_sanitize_both 540
echo "total $((SECONDS - T0))s"
