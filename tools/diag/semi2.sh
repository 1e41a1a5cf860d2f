#!/usr/bin/env bash
# GPU diagnostics of the 2:4 (semi, cuSPARSELt) family, issue 6. Run from the repo root after the
# package is pip-installed; writes semi2.log (everything) and rows.jsonl (one JSON row per timing)
# under $OUT; about 3-4 minutes. Each configuration runs in its own process with a timeout, so a
# sticky CUDA error (or a hang) in one cannot hide the others.
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
OUT=${OUT:-/tmp/semi2-out}
mkdir -p "$OUT"
PY="python3 -X faulthandler"
B="$REPO/tools/diag/semi2_bench.py"
export PYTHONUNBUFFERED=1
exec > >(tee "$OUT/semi2.log") 2>&1
cd /tmp  # import the installed package, not the source tree
step() { echo; echo "=== $* ($(date +%T))"; }
# run LABEL ENV... -- ARGS: one configuration in its own process
run() {
  local label=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  step "$label"
  env "${envs[@]}" timeout 60 $PY "$B" "$@" 2>&1 | grep -v "^$" | tail -40
  echo "(exit ${PIPESTATUS[0]})"
}

step "environment"
nvidia-smi --query-gpu=name,driver_version --format=csv
run "info" SPARSEKERN_X=1 -- info

step "pytest semi (CUDA cases and all)"
timeout 150 $PY -m pytest "$REPO/tests/python/test_semi.py" -q -p no:cacheprovider -x -rs 2>&1 | tail -30

for dt in fp16 bf16; do
  run "torch anchors $dt" SPARSEKERN_X=1 -- torch $dt
  run "ours $dt: search off, layout y (the old path)" SPARSEKERN_SEMI_BACKEND=cusparselt SPARSEKERN_SEMI_SEARCH=0 SPARSEKERN_SEMI_LAYOUT=y -- ours $dt
  run "ours $dt: search off, layout yt" SPARSEKERN_SEMI_BACKEND=cusparselt SPARSEKERN_SEMI_SEARCH=0 SPARSEKERN_SEMI_LAYOUT=yt -- ours $dt
  run "ours $dt: cusparseLtMatmulSearch (lt), both layouts, cuSPARSELt only" SPARSEKERN_SEMI_BACKEND=cusparselt SPARSEKERN_SEMI_SEARCH=lt -- ours $dt
  run "ours $dt: timed choice over every config, both layouts, cuSPARSELt only" SPARSEKERN_SEMI_BACKEND=cusparselt SPARSEKERN_SEMI_SEARCH=1 -- ours $dt
  run "ours $dt: DEFAULT settings (timed choice, dense allowed)" SPARSEKERN_X=1 -- ours $dt
done
run "ours fp16 decode-sized m=16, default settings" SPARSEKERN_X=1 -- ours fp16 16
run "fwd+bwd fp16, default settings" SPARSEKERN_X=1 -- backward fp16
run "fwd+bwd bf16, default settings" SPARSEKERN_X=1 -- backward bf16

step "compute-sanitizer memcheck, small case, search off"
SPARSEKERN_SEMI_BACKEND=cusparselt SPARSEKERN_SEMI_SEARCH=0 timeout 90 compute-sanitizer --tool memcheck --print-limit 5 \
  $PY "$B" sanitize 2>&1 | tail -15
step "compute-sanitizer memcheck, small case, timed choice (every config)"
SPARSEKERN_SEMI_BACKEND=cusparselt SPARSEKERN_SEMI_SEARCH=1 timeout 120 compute-sanitizer --tool memcheck --print-limit 5 \
  $PY "$B" sanitize 2>&1 | tail -15

grep -h "^ROW " "$OUT/semi2.log" | sed 's/^ROW //' > "$OUT/rows.jsonl"
step "summary (ms, vs dense)"
python3 - "$OUT/rows.jsonl" <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"{r.get('dtype',''):15s} {r.get('ms', float('nan')):8.4f} ms  x{r.get('vs_dense', float('nan')):5.2f}  "
          f"err {r.get('rel_err', r.get('rel_err_gx', float('nan'))):.1e}  {r['cfg'][:90]}  {r.get('chosen','')}{r.get('error','')}")
PYEOF
