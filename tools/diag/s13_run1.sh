#!/usr/bin/env bash
# Session 13, call 1 (wheel of this session's tf32 copies, carried as .whl312): the bsr CUDA tests,
# the tf32 BlockSparseLinear kernel split with and without the transposed copies
# (SPARSEKERN_BSR_TF32_COPIES), compute-sanitizer over the copy paths; then session 12's unrun
# kron backlog (s13_next.sh: the lean small-factor backward and the mode-0 head pass).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 200
tail -3 $OUT/bsr_tests.txt
for c in 1 0; do
  echo "=== tf32, SPARSEKERN_BSR_TF32_COPIES=$c" >> $OUT/bsr_tf32_profile.txt
  SPARSEKERN_BSR_TF32_COPIES=$c BSR_PROFILE_KERNELS=1 BSR_PROFILE_BLOCKS=64,128 timeout $(cap 300) \
    python3 $R/tools/diag/bsr_profile.py tf32 >> $OUT/bsr_tf32_profile.txt 2>&1
done
cut -c1-110 $OUT/bsr_tf32_profile.txt
for tool in memcheck racecheck; do
  timeout $(cap 340) compute-sanitizer --tool $tool python3 $R/tools/diag/bsr_tf32_check.py > $OUT/bsr_san_$tool.txt 2>&1
  echo "bsr $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|cases ok' $OUT/bsr_san_$tool.txt | tr '\n' ' ')"
done
diag_kron_cuda_tests 420
cd $R/tools/diag && timeout $(cap 470) python3 kron_bwd_lean.py > $OUT/kron_bwd_lean.txt 2>&1
timeout $(cap 510) python3 kron_head.py > $OUT/kron_head.txt 2>&1; cd /tmp
sed -n '/^cat > \/tmp\/san.py/,/^PY$/p' $R/tools/diag/s13_next.sh | sed '1d;$d' > /tmp/san.py
timeout $(cap 550) compute-sanitizer --tool memcheck python3 /tmp/san.py > $OUT/kron_san_memcheck.txt 2>&1
echo "kron memcheck: $(grep -E 'ERROR SUMMARY|cases ok' $OUT/kron_san_memcheck.txt | tr '\n' ' ')"
echo "total $((SECONDS - T0))s after install"
