#!/usr/bin/env bash
# Session 14, call 15 (final wheel: whole-block tiles for the tf32 sdd at b = 128 from 1.5 blocks
# per SM): the bsr CUDA tests of sdd / tf32 / linear / dense paths, then the issue-3 target bench
# with stk side by side (H100, like s14_bench.sh).
source "$(dirname "$0")/lib.sh"
diag_stk
diag_begin_wheel
diag_bsr_cuda_tests 120 "(sdd or tf32 or linear or dense) and not each_kernel"
diag_bsr_bench 560
tail -45 $OUT/bsr_summary.txt
echo "total $((SECONDS - T0))s after install"
