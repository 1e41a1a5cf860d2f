#!/usr/bin/env bash
# Session 18, call 13 (the session's final kron code: the head's ∂ℓ/∂F pass for heads with
# p·q ≤ 256): the kron CUDA tests, memcheck of the pass (kron_head_grad_check.py) and of the
# register-tile backward (kron_bwd_fast_check.py), then the issue-5 bench and its summary.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 120
timeout $(cap 200) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_head_grad_check.py > /tmp/san_h.txt 2>&1
echo "memcheck head pass exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san_h.txt) $(grep -E 'cases' /tmp/san_h.txt)"
timeout $(cap 300) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_race.py > /tmp/san_f.txt 2>&1
echo "memcheck forward exit $?: $(grep -E 'ERROR SUMMARY|kron_race:' /tmp/san_f.txt | tr '\n' ' ')"
diag_kron_bench 560
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt | grep -v FastKron
echo "total $((SECONDS - T0))s after install"
