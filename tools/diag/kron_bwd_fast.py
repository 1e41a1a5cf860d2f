"""The two-factor register-tile backward (kron_fast_bwd.h) against the generic fused backward and
the step-wise one, device time (CUDA graph of 20 calls), fp32, TF32 off, CUDA only.

Per case: forward device time, without and with keeping T0 (a training forward); each backward
implementation called directly (no autograd: kron._backward with _C.kron_set_backward_kernel("new"
| "old"), from the kept T0 or recomputing it, kron._backward_steps); the new kernel's plan
overrides (rows per tile, stages) on the kept path; and the kernels of one new backward.

Usage: python tools/diag/kron_bwd_fast.py [JSON]; KRON_BWD_CASES=1024x64x64,... picks the cases,
KRON_BWD_SWEEP="tile=8;grid=132" adds plan overrides to the sweep.
"""
from __future__ import annotations

import json
import math
import os
import sys

import torch

from sparsekern import _C
from sparsekern import kron as K
from sparsekern.bench import graph_time_ms

from kron_profile import kernels  # this folder

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
CASES = [(16, [32, 32]), (1024, [32, 32]), (1024, [64, 64]), (4096, [64, 64]), (256, [32, 32]),
         (4096, [32, 32]), (64, [64, 64])]
SWEEP = ["new:rows=1", "new:rows=2", "new:rows=3", "new:rows=4", "new:rows=6", "new:stages=1"]
if os.environ.get("KRON_BWD_CASES"):  # e.g. 1024x64x64,4096x64x64 (batch x factor sizes)
    CASES = [(int(c.split("x")[0]), [int(v) for v in c.split("x")[1:]]) for c in os.environ["KRON_BWD_CASES"].split(",")]
if os.environ.get("KRON_BWD_SWEEP"):  # extra selections, comma-separated without the "new:" prefix
    SWEEP += ["new:" + v for v in os.environ["KRON_BWD_SWEEP"].split(";")]


def plan(x, fs):
    from sparsekern._core import as_dlpack
    return _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], True).splitlines()[0]


rows = []
g = torch.Generator().manual_seed(0)
for batch, sizes in CASES:
    P = math.prod(sizes)
    x = torch.randn(batch, P, generator=g).to(dev)
    fs = [(torch.randn(p, p, generator=g) / math.sqrt(p)).to(dev) for p in sizes]
    gy = torch.randn(batch, P, generator=g).to(dev)
    needs = [True] * (len(fs) + 1)
    r = {"case": f"{batch}x{sizes}"}
    r["fwd_us"] = 1e3 * graph_time_ms(lambda: K.kron_matmul(x, fs), dev)
    _C.kron_set_backward_kernel("old")
    r["old_us"] = 1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs), dev)
    ref = K._backward(x, fs, gy, needs)
    _C.kron_set_backward_kernel("new")
    r["plan"] = plan(x, fs)
    r["fwd_save_us"] = 1e3 * graph_time_ms(lambda: K._forward(x, fs, save=True), dev)
    _, saved = K._forward(x, fs, save=True)
    r["kept"] = saved is not None
    r["recompute_us"] = 1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs), dev)
    r["new_us"] = 1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs, saved), dev)
    out = K._backward(x, fs, gy, needs, saved)
    r["max_rel_diff_new_old"] = max(((a - b).norm() / b.norm()).item() for a, b in zip(out, ref))
    ks, _ = kernels(lambda: K._backward(x, fs, gy, needs, saved))
    r["kernels_new"] = sorted(((n[:50], round(us, 1)) for n, us in ks.items()), key=lambda kv: -kv[1])
    for sel in SWEEP:
        _C.kron_set_backward_kernel(sel)
        r[sel] = 1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs, saved), dev)
    _C.kron_set_backward_kernel("")
    r["steps_us"] = 1e3 * graph_time_ms(lambda: K._backward_steps(x, fs, gy, needs), dev)
    best = min(r["new_us"], r["steps_us"], r["old_us"])
    rows.append(r)
    print(f"{r['case']:16s} fwd {r['fwd_us']:7.1f} (saving T0 {r['fwd_save_us']:7.1f}, kept {r['kept']}) | bwd old "
          f"{r['old_us']:7.1f} recompute {r['recompute_us']:7.1f} kept {r['new_us']:7.1f} "
          f"steps {r['steps_us']:7.1f} | new/fwd {r['new_us'] / r['fwd_us']:.2f} best/fwd {best / r['fwd_us']:.2f} "
          f"| diff {r['max_rel_diff_new_old']:.1e}", flush=True)
    print("   sweep:", " ".join(f"{s[4:]}={r[s]:.1f}" for s in SWEEP), flush=True)
    print("   plan:", r["plan"], flush=True)
    print("   kernels:", "; ".join(f"{n} {us}" for n, us in r["kernels_new"][:4]), flush=True)
    del x, fs, gy, out, ref

if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, fh, indent=1)
