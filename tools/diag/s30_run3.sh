#!/usr/bin/env bash
# Session 30, call 4 (two GPUs): test_multi_gpu.py at the wheel of 67cf83b with this tree's whole
# Python package (csr's cached tensors now carry an event of the stream that made them: operands
# on cuda:1 while cuda:0 is current, and the reverse), and the CSR tests of cross-stream use.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
python3 - <<PY
import shutil, sparsekern, os
shutil.copytree("$R/python/sparsekern", os.path.dirname(sparsekern.__file__), dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("*.so", "__pycache__"))
PY
nvidia-smi -L
T=$R/tests/python
timeout $(cap 300) python3 -m pytest $T/test_multi_gpu.py -q -p no:cacheprovider > $OUT/multi_gpu.txt 2>&1
echo "multi-gpu: $(tail -1 $OUT/multi_gpu.txt)"; grep -E "^FAILED|^ERROR|^E  " $OUT/multi_gpu.txt | head -8 | cut -c1-200
timeout $(cap 400) python3 -m pytest $T/test_csr.py -q -p no:cacheprovider -m cuda -k "stream or compile or graph" > $OUT/csr_streams.txt 2>&1
echo "csr stream/graph tests: $(tail -1 $OUT/csr_streams.txt)"; grep -E "^FAILED" $OUT/csr_streams.txt | head -5
echo "total $((SECONDS - T0))s"
