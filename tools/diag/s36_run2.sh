#!/usr/bin/env bash
# Session 36, call 2: the register-tile forward's per-tile overhead, cut where call 1's ncu source
# counters put it (1024 × (64 ⊗ 64): 19% of the executed instructions outside the k loops, 8% in
# the factor copies alone): 16-byte factor copies, struct fields in locals in the write-backs and
# the final stores, the X copy's divisions by p/4 as FastDiv. A/B of device µs, old/new/old/new
# (plain and training forwards, and the backward after the training forward), then every kron
# CUDA test and memcheck over the forward-kernel tests at the new wheel.
source "$(dirname "$0")/lib.sh"
ab() {
  timeout $(cap 120) python3 $R/tools/diag/kron_fwd_times.py "1024 64,64" "4096 64,64" "1024 32,32" "16 32,32" \
    "1024 128,128" "32 128,128" "128 32,32,32" "256 16,16,16,16" --save
}
diag_ab_wheels ab
diag_kron_cuda_tests 300
timeout $(cap 200) compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "factor_layouts or forward_kernels or fast_overrides" > $OUT/memcheck_fwd.txt 2>&1
echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_fwd.txt | tail -1); $(tail -1 $OUT/memcheck_fwd.txt)"
echo "total $((SECONDS - T0))s"
