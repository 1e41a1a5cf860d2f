#!/usr/bin/env bash
# Session 26, call 1: every CUDA test at HEAD's wheel (6211f70: session 25's last commit, whose
# CUDA side had not run on a GPU): the bsr suite as two processes, kron, and the other files
# (dense, csr, semi, inplace, autocast, dlpack, bert) as a third and fourth, all on the one GPU.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
diag_bsr_halves_start 540
timeout $(cap 540) python3 -m pytest $T/test_kron.py -q -p no:cacheprovider -m cuda > $OUT/kron_tests.txt 2>&1 &
timeout $(cap 540) python3 -m pytest $T/test_dense.py $T/test_csr.py $T/test_semi.py $T/test_inplace.py \
  $T/test_autocast.py $T/test_dlpack_interop.py $T/test_integrations_bert.py $T/test_cpu_gemm.py \
  -q -p no:cacheprovider -m cuda -rs > $OUT/other_tests.txt 2>&1 &
wait
diag_bsr_halves_report
for f in kron_tests other_tests; do echo "$f: $(tail -1 $OUT/$f.txt)"; grep -E "^FAILED|^ERROR" $OUT/$f.txt | head -8; done
grep -E "SKIPPED" $OUT/other_tests.txt | head -5
echo "total $((SECONDS - T0))s"
