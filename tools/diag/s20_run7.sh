#!/usr/bin/env bash
# Session 20, call 7 (a variant not kept: the kernel change was reverted after this call): the natural
# split head's ∂ℓ/∂F pass with 8 × 8 blocks per thread for heads of
# p·q > 256 (now taking 32 × 32 heads from cuBLAS's strided-batched GEMMs). Per-kernel backward
# times (tools/diag/kron_bwd_kernels.py), previous commit's wheel (cuBLAS for those heads) against
# this one's, interleaved twice; the natural-split kron CUDA tests; memcheck of
# tools/diag/kron_head_grad_check.py; the kron bench.
source "$(dirname "$0")/lib.sh"
ab() { timeout $(cap $((60 * AB_ROUND + 30 * (AB_ROUND - 1)))) python3 $R/tools/diag/kron_bwd_kernels.py "128 32,32,32" "512 32,32,32" "64 32,32,32" "256 16,16,16,16" 2>&1 | grep kernels | cut -c1-600; }
diag_ab_wheels ab
timeout $(cap 260) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "natural or head" > $OUT/kron_tests.txt 2>&1
echo "kron natural/head cuda tests: $(tail -1 $OUT/kron_tests.txt)"; grep -E "^FAILED" $OUT/kron_tests.txt | head -5
timeout $(cap 330) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_head_grad_check.py > /tmp/san.txt 2>&1
echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san.txt) | $(tail -1 /tmp/san.txt)"
diag_kron_bench 590
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt
echo "total $((SECONDS - T0))s"
