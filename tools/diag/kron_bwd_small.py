"""The small-factor fused backward (kron_small_bwd.h, SPARSEKERN_KRON_BWD_KERNEL=small) against the
other native backwards ("new": the register-tile backward for two factors, else the generic fused
one; since session 12 auto takes the small-factor one for three or more factors), device time (CUDA graph of 20 calls, sparsekern.bench.graph_time_ms), fp32, TF32
off, CUDA only: per case the forward, the "new" native backward, the small-factor one, the default
("auto"), their ratio to the forward, the largest relative difference between the backwards' gradients,
the plan and the kernels of one small-factor backward.

Usage: python tools/diag/kron_bwd_small.py [JSON]
"""
from __future__ import annotations

import json
import sys

import torch

from sparsekern import _C
from sparsekern import kron as K
from sparsekern.bench import graph_time_ms

from kron_profile import kernels, plan_line, square_case  # this folder

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
CASES = [(1024, [8, 8, 8, 8]), (1024, [16, 16, 16]), (1024, [32, 32]), (1024, [4, 4, 4, 4, 4]),
         (1024, [16, 8, 8]), (4096, [8, 8, 8, 8]), (256, [16, 16, 32]), (16, [32, 32])]

rows = []
g = torch.Generator().manual_seed(0)
for batch, sizes in CASES:
    x, fs, gy = square_case(batch, sizes, g, dev)
    needs = [True] * (len(fs) + 1)
    r = {"case": f"{batch}x{sizes}"}
    r["fwd_us"] = 1e3 * graph_time_ms(lambda: K.kron_matmul(x, fs), dev)
    _C.kron_set_backward_kernel("")
    r["auto_us"] = 1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs), dev)
    _C.kron_set_backward_kernel("new")
    r["new_us"] = 1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs), dev)
    ref = K._backward(x, fs, gy, needs)
    _C.kron_set_backward_kernel("small")
    r["plan"] = plan_line(x, fs)
    r["small_us"] = 1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs), dev)
    out = K._backward(x, fs, gy, needs)
    r["max_rel_diff"] = max(((a - b).norm() / b.norm()).item() for a, b in zip(out, ref))
    ks, _ = kernels(lambda: K._backward(x, fs, gy, needs))
    r["kernels_small"] = sorted(((n[:50], round(us, 1)) for n, us in ks.items()), key=lambda kv: -kv[1])
    _C.kron_set_backward_kernel("")
    rows.append(r)
    print(f"{r['case']:22s} fwd {r['fwd_us']:7.1f} | bwd new {r['new_us']:7.1f} ({r['new_us'] / r['fwd_us']:.2f}x) "
          f"auto {r['auto_us']:7.1f} ({r['auto_us'] / r['fwd_us']:.2f}x) "
          f"small {r['small_us']:7.1f} ({r['small_us'] / r['fwd_us']:.2f}x) | diff {r['max_rel_diff']:.1e}", flush=True)
    print("   plan:", r["plan"], flush=True)
    print("   kernels:", "; ".join(f"{n} {us}" for n, us in r["kernels_small"][:3]), flush=True)
    del x, fs, gy, out, ref

if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, fh, indent=1)
