#!/usr/bin/env bash
# Session 24, call 9: the tf32 grouped-dds threshold for b = 128 at 0.27 (was 0.3): the kernel µs at
# d = 0.25 / 0.28 / 0.3 under auto against forced one-column / grouped, the tf32 and grouped bsr CUDA
# tests, and the natural-split kron tests with the kept-state size check.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R/tools/diag
for g in auto 0 1; do
  if [ $g = auto ]; then unset SPARSEKERN_BSR_GROUPED; else export SPARSEKERN_BSR_GROUPED=$g; fi
  TF32=1 timeout $(cap 150) python3 bsr_fwd_kernel_us.py "128:0.25,0.28,0.3" float32 2>&1 | grep -v "Warning\|_warn_once" | tee -a $OUT/tf32_threshold.txt
done
unset SPARSEKERN_BSR_GROUPED
diag_bsr_cuda_tests 400 "tf32 or grouped"
timeout $(cap 560) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "natural" 2>&1 | tail -1
echo "total $((SECONDS - T0))s"
