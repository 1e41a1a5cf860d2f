#!/usr/bin/env bash
# Session 40, call 8: the bsr dds tile counter no longer zero-filled by the Python layer (the library
# zeroes it before each launch): at the wheel of 52c351b with this tree's Python package copied
# over it, the counter / capture / graph / compile bsr CUDA tests and test_capture.py; then graph
# times and one replay's kernels (tools/diag/bsr_eager_gap.py --graph-profile), the wheel's own
# package (old) and this tree's (new) alternated twice.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_copy_package
timeout $(cap 300) python3 -m pytest $R/tests/python/test_bsr.py $R/tests/python/test_capture.py -q -p no:cacheprovider -m cuda \
  -k "tile_counter or capture or graph or compile or concurrent or each_kernel" > $OUT/bsr_counter_tests.txt 2>&1
echo "bsr counter/capture tests: $(tail -1 $OUT/bsr_counter_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_counter_tests.txt | head -5
_gap() { (cd $R/tools/diag && timeout $(cap 420) python3 bsr_eager_gap.py --graph-profile 8192,4096,4096,128,0.05,bfloat16 \
  8192,3072,768,128,0.1,bfloat16 2>&1 | awk '/ ours:/{o=1; print; next} / dense:/{o=0} o && /one replay/' | cut -c1-300); }
for r in 1 2; do
  diag_install_wheel > /dev/null; echo "== round $r, old package"; _gap
  diag_copy_package; echo "== round $r, new package"; _gap
done
echo "total $((SECONDS - T0))s"
