#!/usr/bin/env bash
# Session 26, call 8: the concurrent weight gradient (bsr._concurrent_grads, now the default) at the
# wheel that makes it so: every bsr CUDA test in four processes, the autocast and BERT-patcher files,
# and memcheck over the concurrent / capture / linear-backward tests.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
n=$(wc -l < /tmp/ids.txt); echo "$n bsr cuda tests"
# round-robin into four lists (the slow tests cluster in file order)
for k in 0 1 2 3; do awk -v k=$k 'NR % 4 == k' /tmp/ids.txt > /tmp/q$k.txt; done
for k in 0 1 2 3; do
  timeout $(cap 420) python3 -m pytest -q -p no:cacheprovider $(cat /tmp/q$k.txt) > $OUT/bsr_q$k.txt 2>&1 &
done
timeout $(cap 420) python3 -m pytest $T/test_autocast.py $T/test_integrations_bert.py -q -p no:cacheprovider -m cuda > $OUT/other.txt 2>&1 &
wait
for k in 0 1 2 3; do echo "bsr part $k: $(tail -1 $OUT/bsr_q$k.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_q$k.txt | head -5; done
echo "autocast + bert: $(tail -1 $OUT/other.txt)"; grep -E "^FAILED|^ERROR" $OUT/other.txt | head -5
diag_bsr_sanitize 560 memcheck "concurrent or cuda_graph_capture or linear_backward or bias_grad" concurrent
echo "total $((SECONDS - T0))s"
