#!/usr/bin/env bash
# Session 6, first call: build (default configuration), every CUDA test (verifies the commits not
# yet run on a GPU: kron auto rule 96ad4b8, sm90 dds TMA helpers 02c9624/6630d1a, semimem merge),
# LayerNorm tail experiments (issue 4: ring bytes per block, an even persistent grid, a row count
# that fills the last round), then the kron bench (JSON) under the auto forward rule.
# Every step under timeout; the whole call aims to end within ~560 s. Summary lines last.
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cp /tmp/build_step.log $OUT/ 2>/dev/null
cd /tmp
T0=$SECONDS
left() { echo $(( ${END:-400} - (SECONDS - T0) )); }
timeout 190 python3 -X faulthandler -m pytest $R/tests/python -q -p no:cacheprovider -m cuda > $OUT/cuda_tests.txt 2>&1
echo "cuda tests exit $?" >> $OUT/cuda_tests.txt
ln() {  # ln TAG ENV...: LayerNorm/RMSNorm % of the copy bandwidth under the given environment
  local tag=$1; shift
  env "$@" INPLACE2_OPS=norm INPLACE2_ERR=0 INPLACE2_TAG=$tag INPLACE2_NORM_SHAPES=16384x4096,16368x4096,16384x2048 \
    timeout 30 python3 $R/tools/diag/inplace2.py > /tmp/ln-$tag.log 2>&1
  awk -v t="$tag" '/^(layer|rms)_norm/ { sub(/\)/, "", $11); printf "%-9s %-10s %-14s %-8s %s %s\n", t, $1, $2 $3, $4, $9, $11 }' /tmp/ln-$tag.log
  grep -m1 "copy ceiling" /tmp/ln-$tag.log | cut -c1-60
}
{
  echo "tag op shape dtype median% burst%"
  ln default X=1
  ln even SPARSEKERN_INPLACE_EVEN_GRID=1
  ln b16k SPARSEKERN_INPLACE_BULK_BYTES=16384
  ln b32k SPARSEKERN_INPLACE_BULK_BYTES=32768
  ln b48k SPARSEKERN_INPLACE_BULK_BYTES=49152
} > $OUT/ln_exp.txt 2>&1
L=$(( 560 - (SECONDS - T0) - 150 )); [ $L -lt 20 ] && L=20
echo "kron bench cap ${L}s"
timeout $L python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json > $OUT/kron_bench.txt 2>&1
echo "kron bench exit $?"
grep -E "geomean|roof" $OUT/kron_bench.txt | head -10
cat $OUT/ln_exp.txt
grep -E "^FAILED|passed|failed|exit" $OUT/cuda_tests.txt | tail -12
echo "total $((SECONDS - T0))s after build"
