#!/usr/bin/env bash
# GPU diagnostics of the 2:4 (semi, cuSPARSELt) follow-up, issue 6 (branch semi3). Run from the repo
# root after the package is pip-installed; writes semi3.log (everything) and rows.jsonl (one JSON
# row per timing) under $OUT; about 3 minutes. Each configuration runs in its own process with a
# timeout, so a sticky CUDA error (or a hang) in one cannot hide the others. What to look for:
# - pytest: every test passes (the injected-failure and strided-output tests are new);
# - "ours fp16 ... DEFAULT": no exception any more; the candidate rows list each failing
#   configuration with its message (INTERNAL_ERROR, "abandoned", "failed on the re-check");
# - fp16 yt alg 0 (torch's configuration) among the timed candidates, near torch's 0.376 ms, and
#   the "strided" runs without the transpose copy (printed alone per run).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
OUT=${OUT:-/tmp/semi3-out}
mkdir -p "$OUT"
PY="python3 -X faulthandler"
B="$REPO/tools/diag/semi2_bench.py"
export PYTHONUNBUFFERED=1
exec > >(tee "$OUT/semi3.log") 2>&1
cd /tmp  # import the installed package, not the source tree
step() { echo; echo "=== $* ($(date +%T))"; }
# run LABEL TIMEOUT ENV... -- ARGS: one configuration in its own process
START=$SECONDS
BUDGET=215  # seconds: the whole script stays under 4 minutes; later steps are skipped past this
run() {
  local label=$1 limit=$2; shift 2
  if (( SECONDS - START + limit > BUDGET )); then step "$label: SKIPPED (time budget)"; return; fi
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  step "$label"
  env "${envs[@]}" timeout "$limit" $PY "$B" "$@" 2>&1 | grep -v "^$" | grep -v "UserWarning\|return cls(\|alg = torch" | tail -60
  echo "(exit ${PIPESTATUS[0]})"
}

step "environment"
nvidia-smi --query-gpu=name,driver_version --format=csv
run "info" 30 SPARSEKERN_X=1 -- info

step "pytest semi (all cases, no -x)"
timeout 90 $PY -m pytest "$REPO/tests/python/test_semi.py" -q -p no:cacheprovider -rs 2>&1 | tail -40

run "torch anchors fp16" 40 SPARSEKERN_X=1 -- torch fp16
run "ours fp16: search off, layout yt (cuSPARSELt's default configuration)" 30 SPARSEKERN_SEMI_BACKEND=cusparselt SPARSEKERN_SEMI_SEARCH=0 SPARSEKERN_SEMI_LAYOUT=yt -- ours fp16
run "ours fp16: cusparseLtMatmulSearch (lt), both layouts, cuSPARSELt only" 40 SPARSEKERN_SEMI_BACKEND=cusparselt SPARSEKERN_SEMI_SEARCH=lt -- ours fp16
run "ours fp16: DEFAULT settings (timed choice, dense allowed)" 40 SPARSEKERN_X=1 -- ours fp16
run "ours fp16: DEFAULT + strided output" 40 SPARSEKERN_SEMI_OUTPUT=strided -- ours fp16
run "torch anchors bf16" 40 SPARSEKERN_X=1 -- torch bf16
run "ours bf16: DEFAULT settings" 30 SPARSEKERN_X=1 -- ours bf16
run "ours bf16: DEFAULT + strided output" 30 SPARSEKERN_SEMI_OUTPUT=strided -- ours bf16
run "ours fp16 decode-sized m=16, default settings" 30 SPARSEKERN_X=1 -- ours fp16 16
run "fwd+bwd fp16, default settings" 30 SPARSEKERN_X=1 -- backward fp16

step "compute-sanitizer memcheck, small case, timed choice (every config, both layouts)"
(( SECONDS - START + 30 > BUDGET )) && echo "SKIPPED (time budget)" || SPARSEKERN_SEMI_BACKEND=cusparselt SPARSEKERN_SEMI_SEARCH=1 timeout $(( BUDGET + 20 - (SECONDS - START) )) compute-sanitizer --tool memcheck --print-limit 5 \
  $PY "$B" sanitize 2>&1 | grep -v "nanobind\|leaked" | tail -15

grep -h "^ROW " "$OUT/semi3.log" | sed 's/^ROW //' > "$OUT/rows.jsonl"
step "summary (ms, vs dense)"
python3 - "$OUT/rows.jsonl" <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"{r.get('dtype',''):15s} {r.get('ms', float('nan')):8.4f} ms  x{r.get('vs_dense', float('nan')):5.2f}  "
          f"err {r.get('rel_err', r.get('rel_err_gx', float('nan'))):.1e}  {r['cfg'][:90]}  {r.get('chosen','')}{r.get('error','')}")
PYEOF
