#!/usr/bin/env bash
# Session 5 (issue 4): the lean block-row kernel of the 16-bit norms (norm_lean_kernel, flag 8:
# fewer instructions per element, fp32 arithmetic, one rounding to 16 bits) against the old
# defaults, in one device call. Does NOT build: build first with the variant switch, e.g.
#   CUDA_FLAGS=-DSPARSEKERN_NORM_VARIANTS STAGES=build bash tools/device_check.sh
# then: OUT=$OUT bash tools/diag/s5_norm.sh
# Variants (SPARSEKERN_INPLACE_NORM_VARIANT=WxF, F = flags, see kKeepFloats in norm_cuda.cu):
#   default  lean, 4 warps per row for 2049-4096 columns, 2 for 1025-2048 (4x8 / 2x8)
#   8x8      lean, 8 warps;  4x8  lean, 4 warps at every length (differs from default at 2048)
#   8x3 4x1 4x0  the old defaults (LayerNorm 2049-4096 / LayerNorm 1025-2048 / RMSNorm)
# Steps in order of importance, each under `timeout`, all within a 150 s budget (a step that
# would start with under 8 s left is skipped and says so). Compact lines on stdout; full logs
# and the timing JSON under $OUT.
source "$(dirname "$0")/lib.sh"
OUT=${OUT:-/tmp/sk-out}
mkdir -p "$OUT"
rm -f "$OUT"/inplace2-*.log "$OUT"/tests-*.log "$OUT"/err-*.log
exec 3>&1  # the script's stdout, for step's notes (the steps' own output goes to log files)
BUDGET=${BUDGET:-150}
T0=$SECONDS
step() {  # step CAP_SECONDS command...: run under timeout min(CAP, what is left of the budget)
  local cap=$1; shift
  local left=$((BUDGET - (SECONDS - T0)))
  if [ "$left" -lt 8 ]; then echo "  (skipped, budget spent: ${*: -1})" >&3; return 0; fi
  [ "$cap" -gt "$left" ] && cap=$left
  timeout "$cap" "$@"
  local rc=$?
  [ $rc -eq 124 ] && echo "  (timed out after ${cap}s)" >&3
  return 0
}
tests() {  # tests VARIANT: the norm / warp-row CUDA tests under it
  echo "=== tests ${1:-default} $((SECONDS - T0))s"
  SPARSEKERN_INPLACE_NORM_VARIANT=$1 step 40 python3 -m pytest $R/tests/python/test_inplace.py -q \
    -p no:cacheprovider -m cuda -k "norm or warp_row" > "$OUT/tests-${1:-default}.log" 2>&1
  grep -E "^FAILED|passed|failed|error" "$OUT/tests-${1:-default}.log" | tail -6
}
errors() {  # errors VARIANT: ours and torch against float64, and ours against torch
  echo "=== errors ${1:-default} $((SECONDS - T0))s"
  SPARSEKERN_INPLACE_NORM_VARIANT=$1 step 30 python3 $R/tools/diag/norm_err.py > "$OUT/err-${1:-default}.log" 2>&1
  grep -v "^variant" "$OUT/err-${1:-default}.log" | cut -c1-220
}
timing() {  # timing VARIANT: % of the copy bandwidth at the three shapes (no error check here)
  local tag=${1:-default}
  SPARSEKERN_INPLACE_NORM_VARIANT=$1 INPLACE2_OPS=norm INPLACE2_ERR=0 INPLACE2_TAG=$tag \
    INPLACE2_NORM_SHAPES=16384x4096,16384x2048,16384x3072 \
    step 25 python3 $R/tools/diag/inplace2.py > "$OUT/inplace2-$tag.log" 2>&1
  # op shape dtype median% burst% (the copy ceiling: the log's first line)
  awk -v t="$tag" '/^(layer|rms)_norm/ { sub(/\)/, "", $11); printf "%-8s %-10s %-14s %-8s %s %s\n", t, $1, $2 $3, $4, $9, $11 }' \
    "$OUT/inplace2-$tag.log"
  grep -E "Error|error" "$OUT/inplace2-$tag.log" | head -3
}
cd /tmp
diag_env 2>&1 | tail -2
tests ""
errors ""
echo "=== timings: variant op shape dtype median-% burst-% of the copy bandwidth $((SECONDS - T0))s"
for v in "" 8x3 4x0 8x8 4x1 4x8; do timing "$v"; done
grep -h -m1 "copy ceiling" "$OUT"/inplace2-*.log | cut -c1-40 | sort | uniq -c
tests 8x8
errors 8x8
tests 4x8
echo "=== end $((SECONDS - T0))s"
