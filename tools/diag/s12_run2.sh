#!/usr/bin/env bash
# Session 12, second call: the small-factor backward's contraction pass reads four fibers per
# 16-byte vector with XOR addressing (kron_small_bwd.h). Every kron CUDA test; its time per kind of
# pass (kron_bwd_parts.py) and against the other backwards (kron_bwd_small.py); compute-sanitizer
# memcheck and racecheck of it; the full kron bench with FastKron's own kernels (the first call's
# FastKron rows were its torch fallback), and the bench summary.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 150
cd $R/tools/diag && timeout $(cap 210) python3 kron_bwd_parts.py
timeout $(cap 270) python3 kron_bwd_small.py $OUT/kron_bwd_small.json | grep -v "^   "; cd /tmp
cat > /tmp/san.py <<'PY'
import torch
from sparsekern import _C, kron as K
_C.kron_set_backward_kernel("small:grid=5")
for b, ps in [(37, [8, 8, 8, 8]), (9, [32, 32]), (5, [16, 16, 32]), (11, [4, 4, 4, 4, 4]), (6, [16, 8, 8])]:
    n = 1
    for p in ps:
        n *= p
    x = torch.randn(b, n, device="cuda"); fs = [torch.randn(p, p, device="cuda") for p in ps]
    g = torch.randn(b, n, device="cuda")
    out = K._backward(x, fs, g, [True] * (len(fs) + 1))
    torch.cuda.synchronize()
print("cases ok")
PY
for tool in memcheck racecheck; do
  timeout $(cap 330) compute-sanitizer --tool $tool python3 /tmp/san.py > /tmp/san_$tool.txt 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|cases ok' /tmp/san_$tool.txt | tr '\n' ' ')"
done
[ -d $R/.fastkron/pyfastkron ] && export PYTHONPATH=$R/.fastkron${PYTHONPATH:+:$PYTHONPATH}
diag_kron_bench 560 > /tmp/bench_rows.txt; head -1 /tmp/bench_rows.txt
python3 -m sparsekern.bench.kron $OUT/kron.json
python3 - <<'PY'
import json, os
for r in json.load(open(os.environ["OUT"] + "/kron.json"))["rows"]:
    if r.get("bench") == "fwd_fastkron":
        print(r["shape"], "FastKron kernels:", "; ".join(k[:40] for k in r.get("anchor_kernels", [])[:3]), r.get("verified"))
    if "error" in r:
        print("ERROR", r["shape"], r["op"], r["error"][:200])
PY
echo "total $((SECONDS - T0))s after install"
