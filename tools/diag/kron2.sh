#!/usr/bin/env bash
# Issue 5 (kron speed) diagnostics for the GPU machine; run from the repo root after the build
# (package pip-installed). Results under $OUT: kron.json (bench), kron_profile.json, *.log.
set -uo pipefail
OUT=${OUT:-/tmp/kron2-out}
mkdir -p "$OUT"
PY="python3 -X faulthandler"
source "$(dirname "$0")/lib.sh"
echo "=== environment ($(date +%T))"
diag_env

echo "=== CUDA kron tests ($(date +%T))"
timeout 80 $PY -m pytest tests/python/test_kron.py -q -m cuda -x 2>&1 | tee "$OUT/pytest_kron.log" | tail -25

echo "=== bench --full --family kron ($(date +%T))"
timeout 90 $PY -m sparsekern.cli bench --full --family kron --json "$OUT/kron.json" 2>&1 | tee "$OUT/bench_kron.log" | tail -30
$PY - "$OUT/kron.json" <<'PYEOF' 2>&1 | tee "$OUT/summary.txt"
import json, math, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("no bench json:", e); sys.exit(0)
rows = [r for r in d["rows"] if r.get("family") == "kron"]
fw = {r["shape"]: r for r in rows if "fwd" in r["op"]}
bw = {r["shape"]: r for r in rows if "bwd" in r["op"]}
sp = []
print(f"{'case':22s} {'fwd us':>8s} {'v2':>8s} {'x v2':>6s} {'%roof':>6s} | {'bwd us':>8s} {'v2':>8s} {'b/f':>5s}")
for s, f in fw.items():
    b = bw.get(s, {})
    if "ours" not in f:
        print(s, "failed"); continue
    sp.append(f["anchor_time"] / f["ours"])
    roof = 100 * f.get("roofline_ms", float("nan")) / f["ours"]
    print(f"{s:22s} {f['ours']*1e3:8.1f} {f['anchor_time']*1e3:8.1f} {f['anchor_time']/f['ours']:6.2f} {roof:6.0f} | "
          f"{b.get('ours', float('nan'))*1e3:8.1f} {b.get('anchor_time', float('nan'))*1e3:8.1f} "
          f"{b.get('ours', float('nan'))/f['ours']:5.2f}")
if sp:
    print("forward geomean speed-up vs v2:", round(math.exp(sum(map(math.log, sp)) / len(sp)), 2))
PYEOF

echo "=== per-kernel profile ($(date +%T))"
timeout 60 $PY tools/diag/kron_profile.py "$OUT/kron_profile.json" 2>&1 | tee "$OUT/profile_kron.log" | tail -250
echo "=== done ($(date +%T))"
