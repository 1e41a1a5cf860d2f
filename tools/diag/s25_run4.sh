#!/usr/bin/env bash
# Session 25, call 4: the per-stream cuBLAS workspace and bsr tile counter no longer cached from
# inside a CUDA-graph capture (python/sparsekern/_core.py). The capture and
# torch.compile(mode="reduce-overhead") tests of dense, kron and bsr first; then every CUDA test of
# dense, inplace, csr, semi and kron in one process and of bsr in two (the halves of the collected
# ids side by side on the one GPU).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 200) python3 -m pytest $R/tests/python/test_dense.py $R/tests/python/test_kron.py $R/tests/python/test_bsr.py \
  -q -p no:cacheprovider -m cuda -k "cuda_graph or reduce_overhead" > $OUT/capture_tests.txt 2>&1
echo "capture/compile tests: $(tail -1 $OUT/capture_tests.txt)"
grep -E "^FAILED|^E  " $OUT/capture_tests.txt | head -10
python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
n=$(wc -l < /tmp/ids.txt); h=$(( (n + 1) / 2 ))
sed -n "1,${h}p" /tmp/ids.txt > /tmp/h1.txt; sed -n "$((h + 1)),${n}p" /tmp/ids.txt > /tmp/h2.txt
echo "$n bsr cuda tests"
for k in 1 2; do
  timeout $(cap 580) python3 -m pytest -q -p no:cacheprovider $(cat /tmp/h$k.txt) > $OUT/bsr_tests_half$k.txt 2>&1 &
done
timeout $(cap 580) python3 -m pytest $R/tests/python/test_dense.py $R/tests/python/test_inplace.py $R/tests/python/test_csr.py \
  $R/tests/python/test_semi.py $R/tests/python/test_kron.py $R/tests/python/test_dlpack_interop.py $R/tests/python/test_integrations_bert.py -q -p no:cacheprovider -m cuda > $OUT/other_tests.txt 2>&1 &
wait
for k in 1 2; do echo "bsr half $k: $(tail -1 $OUT/bsr_tests_half$k.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests_half$k.txt | head -5; done
echo "dense/inplace/csr/semi/kron: $(tail -1 $OUT/other_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/other_tests.txt | head -5
echo "total $((SECONDS - T0))s"
