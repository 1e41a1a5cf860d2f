#!/usr/bin/env bash
# Session 27, call 2 (wheels: .whl312 = the device guard's fix, .whl312_old = a59f1bb):
#  1. the revised fresh-thread script (a forward in a new thread, the process's first backward on
#     the autograd thread) at the old wheel and at the new one, and memcheck over `-k concurrent` at
#     the old wheel in a fresh process (session 26 saw CUDA_ERROR_INVALID_CONTEXT there; call 1 saw
#     none at the new wheel);
#  2. the test at the new wheel;
#  3. every bsr CUDA test with the captured backwards' fork on (SPARSEKERN_BSR_CONCURRENT_GRADS=1),
#     six round-robin processes (s27_next.sh tests).
source "$(dirname "$0")/lib.sh"
diag_old_wheel_and_fresh_script
diag_begin_wheel
T=$R/tests/python
for w in old new; do
  echo "== $w wheel, fresh thread:"
  if [ $w = old ]; then P=/tmp/oldpkg; else P=; fi
  PYTHONPATH=$P timeout $(cap 90) python3 /tmp/fresh.py 2>/dev/null | python3 -c "
import sys, re
for l in sys.stdin:
    k, _, v = l.strip().partition(' ')
    names = v.split('|') if k in ('THREAD', 'MAIN', 'BWD1', 'BWD2') else [v]
    print(k, [re.sub(r'<.*', '', n) for n in names] if len(names) > 1 or '<' in v else v)"
done
PYTHONPATH=/tmp/oldpkg timeout $(cap 130) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -k concurrent > $OUT/san_old.txt 2>&1
echo "old wheel memcheck: $(grep 'ERROR SUMMARY' $OUT/san_old.txt | tail -1) | $(grep -E 'passed|failed' $OUT/san_old.txt | tail -1)"
grep -m3 -E "Program hit" $OUT/san_old.txt
timeout $(cap 160) python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -k fresh_thread 2>&1 | tail -1
python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
for k in 0 1 2 3 4 5; do awk -v k=$k 'NR % 6 == k' /tmp/ids.txt > /tmp/q$k.txt; done
for k in 0 1 2 3 4 5; do
  SPARSEKERN_BSR_CONCURRENT_GRADS=1 timeout $(cap 590) python3 -m pytest -q -p no:cacheprovider $(cat /tmp/q$k.txt) > $OUT/bsr_q$k.txt 2>&1 &
done
wait
for k in 0 1 2 3 4 5; do echo "bsr part $k (fork on): $(tail -1 $OUT/bsr_q$k.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_q$k.txt | head -5; done
echo "total $((SECONDS - T0))s"
