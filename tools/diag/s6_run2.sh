#!/usr/bin/env bash
# Session 6, second call: build; (issue 3) the grouped sm_90a dds with the lane-parallel union
# producer: bsr CUDA tests forced through it and by default, memcheck over the grouped edge tests,
# kernel times grouped vs one-column; (issue 4) the 48 KB ring of the LayerNorm block-row kernel:
# norm tests, a ring-size sweep, the in-place bench JSON. Summary lines last.
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
T=$R/tests/python
SPARSEKERN_BSR_GROUPED=1 timeout 120 python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -x > $OUT/bsr_tests_grouped.txt 2>&1
echo "exit $?" >> $OUT/bsr_tests_grouped.txt
SPARSEKERN_BSR_GROUPED=1 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda -k "grouped_edges and not each" > $OUT/bsr_memcheck.txt 2>&1
echo "exit $?" >> $OUT/bsr_memcheck.txt
for g in 1 0; do
  echo "=== bsr kernel times, SPARSEKERN_BSR_GROUPED=$g"
  SPARSEKERN_BSR_GROUPED=$g timeout 60 python3 $R/tools/diag/bsr_profile.py bfloat16 2>&1 | grep -E "^b=(32|64)|dense" | sed -E 's/ \| fwd: .*//'
done > $OUT/bsr_kernel_times.txt 2>&1
timeout 60 python3 -m pytest $T/test_inplace.py -q -p no:cacheprovider -m cuda -k "norm or warp_row" > $OUT/norm_tests.txt 2>&1
echo "exit $?" >> $OUT/norm_tests.txt
ln() {
  local tag=$1; shift
  env "$@" INPLACE2_OPS=norm INPLACE2_ERR=0 INPLACE2_TAG=$tag INPLACE2_NORM_SHAPES=16384x4096,16384x3072,16384x2048 \
    timeout 30 python3 $R/tools/diag/inplace2.py > /tmp/ln-$tag.log 2>&1
  awk -v t="$tag" '/^(layer|rms)_norm/ { sub(/\)/, "", $11); printf "%-9s %-10s %-14s %-8s %s %s\n", t, $1, $2 $3, $4, $9, $11 }' /tmp/ln-$tag.log
}
{ ln new X=1; ln b40k SPARSEKERN_INPLACE_BULK_BYTES=40960; ln b56k SPARSEKERN_INPLACE_BULK_BYTES=57344; } > $OUT/ln_exp.txt 2>&1
timeout 150 python3 -m sparsekern.cli bench --full --family inplace --json $OUT/inplace.json > $OUT/inplace_bench.txt 2>&1
echo "inplace bench exit $?"
grep -E "norm|softmax|square" $OUT/inplace_bench.txt | cut -c1-150 | head -24
grep -E "layer_norm" $OUT/ln_exp.txt
cat $OUT/bsr_kernel_times.txt
for f in bsr_tests_grouped bsr_memcheck norm_tests; do echo "$f: $(grep -E "passed|failed|ERROR SUMMARY" $OUT/$f.txt | tail -2 | tr '\n' ' ') $(tail -1 $OUT/$f.txt)"; done
grep -E "^FAILED" $OUT/bsr_tests_grouped.txt | head -5
