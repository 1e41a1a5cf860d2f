#!/usr/bin/env bash
# Session 23, call 5: the bias gradient from the weight gradient's sdd (SddParams::a_row_sums) on the
# H100: its CUDA tests, compute-sanitizer memcheck of them and racecheck of a few, and the layer
# backward with the fused row sums against the separate column sums (tools/diag/bsr_bias_ab.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 150) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda \
  -k "row_sums or bias_grad or bias_gradient" > $OUT/row_sums_tests.txt 2>&1
echo "row-sum tests: $(tail -1 $OUT/row_sums_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/row_sums_tests.txt | head -5
cd $R/tools/diag && timeout $(cap 330) python3 bsr_bias_ab.py 2>&1 | tee $OUT/bias_ab.txt | grep -v "^ *File\|^    "; cd /tmp
diag_bsr_sanitize 480 memcheck "row_sums or bias_grad" memcheck_rows
diag_bsr_sanitize 570 racecheck "test_sdd_row_sums and (bfloat16 or tf32) and 32" racecheck_rows
echo "total $((SECONDS - T0))s"
