#!/usr/bin/env bash
# Prepared in session 26 for the next device session (not run yet): what session 26 could not
# check once its device time was spent, at the wheel of HEAD (tools/build_device_wheel.sh).
#  1. memcheck over the revised concurrent-gradient test in a fresh process, the fork on and off
#     (session 26's call 12 saw captures fail under the sanitizer with the earlier test);
#  2. the bsr CUDA tests with the fork switched on for every capture (SPARSEKERN_BSR_CONCURRENT_GRADS=1),
#     as four round-robin processes: the evidence a default-on change would need;
#  3. the concurrent-gradient test itself.
# Then, if all pass: the target bench with SPARSEKERN_BSR_CONCURRENT_GRADS=1 is
# bsr-targets-H100-2026-11-27-session26-concurrent-capture.json's rule (already measured).
# Two device calls: `bash tools/diag/s27_next.sh sanitize` (1, 3) and `… tests` (2; session 26's
# four-process run needed more than 420 s for the slowest part).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
if [ "${1:-}" = sanitize ]; then
  diag_bsr_sanitize 200 memcheck "concurrent" concurrent_default
  SPARSEKERN_BSR_CONCURRENT_GRADS=1 diag_bsr_sanitize 500 memcheck "concurrent or cuda_graph_capture" concurrent_on
  grep -m3 "Program hit" $OUT/san_concurrent_on.txt
  diag_bsr_cuda_tests 580 "concurrent"
  echo "total $((SECONDS - T0))s"
  exit 0
fi
python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
for k in 0 1 2 3; do awk -v k=$k 'NR % 4 == k' /tmp/ids.txt > /tmp/q$k.txt; done
for k in 0 1 2 3; do
  SPARSEKERN_BSR_CONCURRENT_GRADS=1 timeout $(cap 590) python3 -m pytest -q -p no:cacheprovider $(cat /tmp/q$k.txt) > $OUT/bsr_q$k.txt 2>&1 &
done
wait
for k in 0 1 2 3; do echo "bsr part $k (fork on): $(tail -1 $OUT/bsr_q$k.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_q$k.txt | head -5; done
echo "total $((SECONDS - T0))s"
