#!/usr/bin/env bash
# Session 22, call 8: the TF32 dense-path sdd with the transposed operand and the new TF32 dense
# thresholds: the dense-path, workspace and split tests, then the TF32 cells of the target bench
# (SPARSEKERN_BENCH_BSR=tf32).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 150 "sdd_dense or workspace or sdd_split_k_sm80 or linear_tf32"
SPARSEKERN_BENCH_BSR=tf32 timeout $(cap 380) python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr_tf32.json > /tmp/bsr_bench.txt 2> $OUT/bsr_bench_rows.txt
echo "bench exit $?"
python3 -m sparsekern.bench.bsr $OUT/bsr_tf32.json > $OUT/bsr_tf32_summary.txt 2>&1
cat $OUT/bsr_tf32_summary.txt
echo "total $((SECONDS - T0))s"
