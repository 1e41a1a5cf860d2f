#!/usr/bin/env bash
# Issue 5, the step-wise kron backward (branch kronbwd), on the GPU machine after the build step:
#   run(command="STAGES=build bash tools/device_check.sh && bash tools/diag/kron_bwd_steps.sh", carry=[".whl"])
# Results under $OUT: pytest_*.log, kron_bwd_steps.json/.log (TF32 off), kron_bwd_steps_tf32.json/.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/kronbwd-out}
mkdir -p "$OUT"
PY="python3 -X faulthandler"
source "$(dirname "$0")/lib.sh"
echo "=== environment ($(date +%T))"
diag_env

echo "=== CUDA kron tests, default backward ($(date +%T))"
timeout 120 $PY -m pytest tests/python/test_kron.py -q -m cuda -x -p no:cacheprovider 2>&1 | tee "$OUT/pytest_kron.log" | tail -8
echo "=== CUDA kron tests with SPARSEKERN_KRON_BWD=steps (every backward test through the steps) ($(date +%T))"
SPARSEKERN_KRON_BWD=steps timeout 120 $PY -m pytest tests/python/test_kron.py -q -m cuda -p no:cacheprovider \
  2>&1 | tee "$OUT/pytest_kron_steps.log" | tail -8

echo "=== timings, TF32 off ($(date +%T))"
timeout 200 $PY tools/diag/kron_bwd_steps.py cuda --paper --split 8,32,132 --profile --json "$OUT/kron_bwd_steps.json" \
  2>&1 | tee "$OUT/kron_bwd_steps.log"
echo "=== timings, TF32 on ($(date +%T))"
timeout 100 $PY tools/diag/kron_bwd_steps.py cuda --tf32 --split 32 --json "$OUT/kron_bwd_steps_tf32.json" \
  2>&1 | tee "$OUT/kron_bwd_steps_tf32.log"
echo "=== done ($(date +%T))"
