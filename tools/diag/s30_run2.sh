#!/usr/bin/env bash
# Session 30, call 2: compute-sanitizer memcheck over the CUDA tests of the smaller families (dense,
# csr, in-place: whole files) and over subsets of the bsr and kron suites, three processes at once,
# at the same wheel as call 1, and the CPU-level edge-case files (CLI included) against it. Each line: the sanitizer's summary, the tests passed and failed
# (counted from -v lines: a process stopped by its cap prints no summary) and pytest's last line.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
# This tree's whole Python package over the wheel's (call 1 copied only the top-level modules, so its
# CLI tests ran the wheel's older bench/ and check/ and failed; they run again here).
diag_copy_package
T=$R/tests/python
san() {  # NAME LIMIT pytest-args...
  local name=$1 lim=$2; shift 2
  timeout $(cap $lim) compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest -v -p no:cacheprovider -m cuda "$@" \
    > $OUT/san_$name.txt 2>&1
}
san small 560 $T/test_dense.py $T/test_csr.py $T/test_inplace.py &
san bsr 560 $T/test_bsr.py -k "(test_dsd or test_dds or test_sdd) and (bfloat16 or float32) and not 8192" &
san kron 560 $T/test_kron.py -k "small or regtile or natural or head" &
timeout $(cap 300) python3 -m pytest $T/test_api_edges.py $T/test_module_edges.py -q -p no:cacheprovider \
  > $OUT/edges_tests.txt 2>&1 &
wait
echo "edges_tests: $(tail -1 $OUT/edges_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/edges_tests.txt | head -8
for n in small bsr kron; do
  echo "memcheck $n: $(grep -E 'ERROR SUMMARY' $OUT/san_$n.txt | tail -1) | $(grep -c ' PASSED' $OUT/san_$n.txt) passed, $(grep -c ' FAILED' $OUT/san_$n.txt) failed | $(tail -1 $OUT/san_$n.txt | cut -c1-120)"
  grep -E "^FAILED|Invalid|out of bounds" $OUT/san_$n.txt | head -5
done
echo "total $((SECONDS - T0))s"
