#!/usr/bin/env bash
# Written in session 11 (whose device time had run out) for the next device call; not run yet.
# Installs the wheel of tools/build_device_wheel.sh (carry .whl312: no build on the GPU machine),
# then: every kron CUDA test; the small-factor backward (kron_small_bwd.h, opt-in) timed next to
# the default backward (kron_bwd_small.py) and under compute-sanitizer memcheck and racecheck; the
# full kron bench into $OUT/kron.json, with the FastKron rows when a FastKron build is carried in
# .fastkron/ (its Python package with the CUDA module; see the issue-5 notes for how it was built).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 200
cd $R/tools/diag && timeout $(cap 260) python3 kron_bwd_small.py $OUT/kron_bwd_small.json; cd /tmp
cat > /tmp/san.py <<'PY'
import torch
from sparsekern import _C, kron as K
_C.kron_set_backward_kernel("small:grid=5")
for b, ps in [(37, [8, 8, 8, 8]), (9, [32, 32]), (5, [16, 16, 32])]:
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
  timeout $(cap 380) compute-sanitizer --tool $tool python3 /tmp/san.py > $OUT/san_$tool.txt 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|cases ok' $OUT/san_$tool.txt | tr '\n' ' ')"
done
if [ -d $R/.fastkron/pyfastkron ]; then
  export PYTHONPATH=$R/.fastkron${PYTHONPATH:+:$PYTHONPATH}
  python3 -c "from pyfastkron import fastkronbase as b; print('FastKron CUDA backend:', b.fastkronCUDA is not None)"
fi
diag_kron_bench 560
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/kron.json"))
for r in d["rows"]:
    if r.get("bench", "").endswith("fastkron"):
        print(f"{r['op'][12:]:4s} {r['shape']:18s} ours {1e3*r['ours']:7.1f} FastKron {1e3*r['anchor_time']:7.1f} us "
              f"ratio {r['ratio']:.2f} verified {r.get('verified')} {r.get('error', '')}")
PY
echo "total $((SECONDS - T0))s after install"
