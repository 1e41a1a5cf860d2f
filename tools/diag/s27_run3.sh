#!/usr/bin/env bash
# Session 27, call 3, on two H100s (wheels: .whl312 = the device guard's fix, .whl312_old = the same
# tree without it):
#  1. test_multi_gpu.py at the new wheel (last run on two GPUs in session 25; the guard and the
#     captured backward's fork per device are new since), and the fresh-thread test;
#  2. session 26's sanitizer failure isolated (tools/diag/bsr_capture_order.py): the layer's backward
#     captured after / without an eager backward, the fork off / on, each under memcheck in a fresh
#     process;
#  3. memcheck over `-k concurrent` at the old wheel and at the new one: CUDA_ERROR_INVALID_CONTEXT?
source "$(dirname "$0")/lib.sh"
diag_old_wheel_and_fresh_script
diag_begin_wheel
nvidia-smi -L
T=$R/tests/python
timeout $(cap 200) python3 -m pytest $T/test_multi_gpu.py -q -p no:cacheprovider > $OUT/multi_gpu.txt 2>&1
echo "multi-gpu: $(tail -1 $OUT/multi_gpu.txt)"; grep -E "^FAILED|^ERROR" $OUT/multi_gpu.txt | head -8
timeout $(cap 230) python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -k fresh_thread 2>&1 | tail -1
for ef in 1 0; do for c in 0 1; do
  timeout $(cap 330) compute-sanitizer --tool memcheck --print-limit 3 python3 $R/tools/diag/bsr_capture_order.py $ef $c > /tmp/o.txt 2>&1
  echo "memcheck: $(grep -E '^eager_first' /tmp/o.txt) | $(grep 'ERROR SUMMARY' /tmp/o.txt)"
  grep -m2 "Program hit" /tmp/o.txt | cut -c1-200
done; done
timeout $(cap 345) python3 $R/tools/diag/bsr_capture_order.py 1 1
for w in old new; do
  if [ $w = old ]; then P=/tmp/oldpkg; else P=; fi
  PYTHONPATH=$P timeout $(cap $([ $w = old ] && echo 420 || echo 500)) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -k "concurrent or fresh_thread" > $OUT/san_$w.txt 2>&1
  echo "$w wheel memcheck: $(grep 'ERROR SUMMARY' $OUT/san_$w.txt | tail -1) | $(grep -E 'passed|failed' $OUT/san_$w.txt | tail -1)"
  grep -m3 -E "Program hit" $OUT/san_$w.txt | cut -c1-200
done
echo "total $((SECONDS - T0))s"
