"""The small-factor backward with 16 elements per thread and row ("small:e=16": 256 threads on the
same tile buffers) against the default 32 ("small"), device time (CUDA graph of 20 calls), fp32,
TF32 off, CUDA only. Per case the forward, then both selections alternated for ROUNDS rounds (each
round one graph-timed measurement of each, so drift hits both alike), the largest relative
difference between their gradients, and the kernels of one backward of each.

Usage: python tools/diag/kron_bwd_e16.py [ROUNDS] [JSON]
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
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
CASES = [(1024, [8, 8, 8, 8]), (1024, [16, 16, 16]), (4096, [8, 8, 8, 8]), (4096, [16, 16, 16]),
         (1024, [4, 4, 4, 4, 4]), (1024, [16, 8, 8]), (256, [16, 16, 16, 16]), (64, [8, 8, 8, 8, 8])]
SELS = ["small", "small:e=16"]

rows = []
g = torch.Generator().manual_seed(0)
for batch, sizes in CASES:
    x, fs, gy = square_case(batch, sizes, g, dev)
    needs = [True] * (len(fs) + 1)
    r = {"case": f"{batch}x{sizes}", "fwd_us": 1e3 * graph_time_ms(lambda: K.kron_matmul(x, fs), dev)}
    out = {}
    for sel in SELS:
        _C.kron_set_backward_kernel(sel)
        r[f"plan {sel}"] = plan_line(x, fs)
        out[sel] = K._backward(x, fs, gy, needs)
        ks, _ = kernels(lambda: K._backward(x, fs, gy, needs))
        r[f"kernels {sel}"] = sorted(((n[:50], round(us, 1)) for n, us in ks.items()), key=lambda kv: -kv[1])
        r[f"us {sel}"] = []
    for _ in range(ROUNDS):
        for sel in SELS:
            _C.kron_set_backward_kernel(sel)
            r[f"us {sel}"].append(1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs), dev))
    _C.kron_set_backward_kernel("")
    r["max_rel_diff"] = max(((a - b).norm() / b.norm()).item() for a, b in zip(out[SELS[1]], out[SELS[0]]))
    rows.append(r)
    line = " | ".join(f"{sel} " + " ".join(f"{u:6.1f}" for u in r[f"us {sel}"]) +
                      f" ({min(r[f'us {sel}']) / r['fwd_us']:.2f}x)" for sel in SELS)
    print(f"{r['case']:22s} fwd {r['fwd_us']:6.1f} | {line} | diff {r['max_rel_diff']:.1e}", flush=True)
    for sel in SELS:
        print(f"   {sel}: {r[f'plan {sel}']}", flush=True)
        print("     kernels:", "; ".join(f"{n} {us}" for n, us in r[f"kernels {sel}"][:4]), flush=True)
    del x, fs, gy, out

if len(sys.argv) > 2:
    with open(sys.argv[2], "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, fh, indent=1)
