#!/usr/bin/env bash
# Session 24, call 1: session 23's last commit (f7497db: one HMMA sdd mainloop with optional row
# sums, the dtype dispatch moved to device_types.cuh, the row-partial split rule) had not run on a
# GPU. Every bsr CUDA test, the two halves of the collected ids side by side (two processes on the
# one GPU: the tests are mostly host-bound), with memcheck over the row-sum and bias tests as a
# third process; then the fused / separate bias-gradient A/B of two cells.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
n=$(wc -l < /tmp/ids.txt); h=$(( (n + 1) / 2 ))
sed -n "1,${h}p" /tmp/ids.txt > /tmp/h1.txt; sed -n "$((h + 1)),${n}p" /tmp/ids.txt > /tmp/h2.txt
echo "$n cuda tests"
for k in 1 2; do
  timeout $(cap 470) python3 -m pytest -q -p no:cacheprovider $(cat /tmp/h$k.txt) > $OUT/bsr_tests_half$k.txt 2>&1 &
done
timeout $(cap 470) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q \
  -p no:cacheprovider -m cuda -k "row_sums or bias" > $OUT/san_memcheck.txt 2>&1 &
wait
for k in 1 2; do echo "half $k: $(tail -1 $OUT/bsr_tests_half$k.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests_half$k.txt | head -5; done
echo "memcheck (row_sums or bias): $(grep -E 'ERROR SUMMARY' $OUT/san_memcheck.txt | tail -1) | $(tail -1 $OUT/san_memcheck.txt)"
echo "tests done at $((SECONDS - T0))s"
cd $R/tools/diag && timeout $(cap 580) python3 bsr_bias_ab.py tf32:4096:4096:64:0.1 bf16:4096:4096:32:0.05 2>&1 | tee $OUT/bias_ab.txt | grep -v "^ *File\|^    "
echo "total $((SECONDS - T0))s"
