#!/usr/bin/env bash
# Session 28, call 12: the two-level csr pattern registry (identity + pointer LRU) on the GPU (every
# csr / capture CUDA test), and the diag scripts after their refactor onto graphtime.layer_from_spec /
# replay_time (one layer each), at this tree's Python over the carried wheel's library.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
SP=$(python3 -c "import sparsekern, os; print(os.path.dirname(sparsekern.__file__))")
cp $R/python/sparsekern/*.py $SP/
for f in test_csr test_capture; do
  timeout $(cap 200) python3 -m pytest $R/tests/python/$f.py -q -p no:cacheprovider -m cuda > $OUT/$f.txt 2>&1
  echo "$f: $(tail -1 $OUT/$f.txt)"; grep -E "^FAILED|^ERROR|^E  " $OUT/$f.txt | head -6
done
cd $R/tools/diag
timeout $(cap 260) python3 bsr_bwd_parts.py bf16:3072:768:128:0.1 2>&1 | grep -v -i "warn\|run_backward" | head -3
timeout $(cap 300) python3 bsr_fork_split.py bf16:3072:768:128:0.1 2>&1 | grep -v -i "warn\|run_backward"
timeout $(cap 340) python3 bsr_bias_capture.py bf16:3072:768:128:0.1 2>&1 | grep -v -i "warn\|run_backward"
timeout $(cap 400) python3 semi_capture_cost.py 2>&1 | grep -v -i warn | head -2
echo "total $((SECONDS - T0))s"
