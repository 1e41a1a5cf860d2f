#!/usr/bin/env bash
# Issue 4 (in-place softmax / layer_norm / rms_norm bandwidth), branch inplace2. Runs from the repo
# root after the lead's build (package installed); results under $OUT. At most ~6 minutes (timeouts), typically 3-4:
#   1. ptxas resource usage of the warp-row kernels (if the build's objects are findable)
#   2. the CUDA in-place tests (every path, both sides of each switch point)
#   3. the target shapes with the new warp-row kernels, then with them off (A/B in one run)
#   4. compute-sanitizer on the warp-row tests
#   5. the family's bench rows (--full), same JSON as `sparsekern bench`
set -uo pipefail
OUT=${OUT:-/tmp/inplace2-out}
mkdir -p "$OUT"
PY="python3 -X faulthandler"
export PYTHONUNBUFFERED=1
step() { echo; echo "=== $* ($(date +%T))"; }

step "environment"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv
git log --oneline -1

step "pytest CUDA in-place"
timeout 100 $PY -m pytest tests/python/test_inplace.py -q -m cuda -x -p no:cacheprovider --durations=5 \
  2>&1 | tail -25 | tee "$OUT/pytest.log"

step "target shapes, warp rows ON"
SPARSEKERN_INPLACE_WARP_ROWS=1 timeout 60 $PY tools/diag/inplace2.py 2>&1 | tee "$OUT/diag-on.log"
step "target shapes, warp rows OFF (block tile, the previous kernels)"
SPARSEKERN_INPLACE_WARP_ROWS=0 timeout 60 $PY tools/diag/inplace2.py 2>&1 | tee "$OUT/diag-off.log"

step "compute-sanitizer (warp-row tests)"
if command -v compute-sanitizer >/dev/null; then
  timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 $PY -m pytest tests/python/test_inplace.py -q \
    -m cuda -x -p no:cacheprovider -k "warp_row and (4096 or 264 or 2056 or views or many)" 2>&1 | tail -15 \
    | tee "$OUT/sanitizer.log"
else
  echo "no compute-sanitizer on PATH"
fi

step "bench --full --family inplace"
timeout 110 $PY -m sparsekern.cli bench --full --family inplace --json "$OUT/inplace.json" 2>&1 | tail -40 \
  | tee "$OUT/bench.log"
echo "done $(date +%T)"
