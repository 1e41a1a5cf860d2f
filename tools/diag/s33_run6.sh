#!/usr/bin/env bash
# Session 33, call 6: the contraction passes with the groups unrolled and the fibers four at a time
# (new wheel, .whl312) against c0b8490's (.whl312_old), alternated old/new/old/new
# (kron_bwd_times.py); then with the new wheel the kron small-factor and natural-split CUDA tests,
# memcheck and racecheck over kron_small_bwd_check.py, and issue 5's bench (sparsekern bench --full
# --family kron) with its summary.
source "$(dirname "$0")/lib.sh"
diag_kron_bwd_ab 200 "${KRON_BWD_CASES[@]}"
diag_kron_small_natural_tests 240
for tool in memcheck racecheck; do
  timeout $(cap 300) compute-sanitizer --tool $tool python3 $R/tools/diag/kron_small_bwd_check.py > $OUT/san_$tool.txt 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|cases ok' $OUT/san_$tool.txt | tr '\n' ' ' | cut -c1-200)"
done
diag_kron_bench 560
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; tail -13 $OUT/kron_summary.txt
echo "total $((SECONDS - T0))s"
