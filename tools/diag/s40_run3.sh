#!/usr/bin/env bash
# Session 40, call 3: at the wheel of 911481a (52c351b + the uniform-shape small forward with 64 elements
# per thread and row, selection "small:elems=64": 64-thread blocks, a row per tile, six blocks per
# SM), forward device µs of "small" (32 elements, 128 threads) against "small:elems=64",
# interleaved in one process; the small / elems64 kron CUDA tests; memcheck and racecheck over
# kron_small_check.py (now with elems=64 cases).
source "$(dirname "$0")/lib.sh"
rm -f $OUT/*; cd /tmp; diag_start
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
python3 -m pip install -q --no-deps --no-index --force-reinstall $R/.whl312/sparsekern-*.whl > /tmp/inst.txt 2>&1 || { tail -3 /tmp/inst.txt; exit 1; }
diag_env
(cd $R/tools/diag && timeout $(cap 200) python3 kron_sel_times.py --sel "small;small:elems=64" --rounds 3 \
  "1024 16,16,16" "4096 16,16,16" "256 16,16,16" "1024 8,8,8,8" "4096 8,8,8,8" "256 8,8,8,8" "16 8,8,8,8")
echo "== checks ($((SECONDS - T0))s)"
timeout $(cap 320) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "small or natural" \
  > $OUT/kron_small_tests.txt 2>&1
echo "kron small/natural/elems64 cuda tests: $(tail -1 $OUT/kron_small_tests.txt)"; grep -E "^FAILED" $OUT/kron_small_tests.txt | head -5
diag_kron_small_sanitize 420 memcheck
diag_kron_small_sanitize 540 racecheck
echo "total $((SECONDS - T0))s"
