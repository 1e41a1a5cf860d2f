#!/usr/bin/env bash
# Session 12, third call: the full kron bench with FastKron's own CUDA kernels (a local build whose
# compute-capability table maps sm_90 to its ampere kernels; the pyfastkron x86-backend check
# bypassed, see sparsekern/bench/kron.py), each case probed in a child process first, and the summary.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
export PYTHONPATH=$R/.fastkron${PYTHONPATH:+:$PYTHONPATH}
diag_kron_bench 500 > /tmp/bench_rows.txt; head -1 /tmp/bench_rows.txt
grep -E "^\[fastkron\]" $OUT/kron_bench.txt | cut -c1-200
python3 -m sparsekern.bench.kron $OUT/kron.json
python3 - <<'PY'
import json, os
for r in json.load(open(os.environ["OUT"] + "/kron.json"))["rows"]:
    if r.get("bench") == "fwd_fastkron":
        print(r["shape"], "FastKron kernels:", "; ".join(k[:50] for k in r.get("anchor_kernels", [])[:3]), "verified", r.get("verified"))
    if "error" in r:
        print("ERROR", r["shape"], r["op"], r["error"][:200])
PY
echo "total $((SECONDS - T0))s after install"
