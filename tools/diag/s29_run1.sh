#!/usr/bin/env bash
# Session 29, call 1: every CUDA test at HEAD's wheel. Session 28's last three commits (semi's
# abandon threshold 090b2fb, per-thread CPU scratch 9917266, hold() by value c282379) and this
# session's (whole-array checks of the in-place bindings, CPU scratch of bsr / kron emulation)
# had not run on a GPU: the bsr suite as two processes, kron, and the other files as a fourth.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
# This tree's Python package over the wheel's (the wheel carries the native module of 65748a9).
SP=$(python3 -c "import sparsekern,os;print(os.path.dirname(sparsekern.__file__))"); cp $R/python/sparsekern/*.py $SP/
T=$R/tests/python
diag_bsr_halves_start 560
timeout $(cap 560) python3 -m pytest $T/test_kron.py -q -p no:cacheprovider -m cuda > $OUT/kron_tests.txt 2>&1 &
timeout $(cap 560) python3 -m pytest $T/test_dense.py $T/test_csr.py $T/test_semi.py $T/test_inplace.py \
  $T/test_autocast.py $T/test_dlpack_interop.py $T/test_integrations_bert.py $T/test_cpu_gemm.py \
  $T/test_bindings.py $T/test_capture.py $T/test_bsr_edges.py -q -p no:cacheprovider -m cuda -rs > $OUT/other_tests.txt 2>&1 &
wait
diag_bsr_halves_report
for f in kron_tests other_tests; do echo "$f: $(tail -1 $OUT/$f.txt)"; grep -E "^FAILED|^ERROR" $OUT/$f.txt | head -8; done
grep -E "SKIPPED" $OUT/other_tests.txt | head -5
echo "total $((SECONDS - T0))s"
