"""Device time of the register-tile forward (kron_fast.h) with X loaded in 1, 2, 4 or 8 slabs along k
(forward selection "new:slabs=K", which exists only at commit 1d9acb6: measured slower, reverted),
fp32, TF32 off. Each case runs
every selection in turn, twice (interleaved), in one process; prints the plan once per selection
and µs per call (graphtime.graph_time: 50 calls in a CUDA graph, median of 5 replays), with the %
of the issue-5 roofline (FLOPs / 51.67 TFLOP/s vs minimal bytes / 2.955 TB/s, the H100 values the
bench measured in session 24). KRON_SLABS_SELS="auto" times the default plan only (an A/B of two
wheels; selections separated by ';'). Arguments: cases as "M p,p[,p...]" (square factors); default the
register-tile cases of the issue's table and a few more."""
import sys

import torch

from graphtime import graph_time
from sparsekern import _C, kron_matmul
from sparsekern._core import as_dlpack

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
import os
# KRON_SLABS_SELS="auto": only the default plan (an A/B of two wheels); selections separated by ';'.
SELS = os.environ.get("KRON_SLABS_SELS", "new;new:slabs=2;new:slabs=4;new:slabs=8").split(";")
PEAK, BW = 51.67e12, 2.955e12


def roofline_us(M, ps):
    n = 1
    for p in ps:
        n *= p
    flops = 2.0 * M * n * sum(ps)
    return max(flops / PEAK, 8.0 * M * n / BW) * 1e6


cases = sys.argv[1:] or ["1024 64,64", "1024 32,32", "4096 64,64", "2048 64,64", "16 32,32", "128 32,32,32",
                         "1024 8,16,32", "4096 32,32"]
for case in cases:
    m, fs = case.split()
    M, ps = int(m), [int(v) for v in fs.split(",")]
    x = torch.randn(M, eval("*".join(map(str, ps))), device=dev)
    fac = [torch.randn(p, p, device=dev) / p ** 0.5 for p in ps]
    ref = kron_matmul(x, fac)
    roof = roofline_us(M, ps)
    res = {s: [] for s in SELS}
    for rnd in range(2):
        for sel in SELS:
            _C.kron_set_forward_kernel(sel)
            y = kron_matmul(x, fac)
            err = ((y - ref).norm() / ref.norm()).item()
            if rnd == 0:
                plan = _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fac], False)
                print(f"{case:14s} {sel:12s} err {err:.1e} {plan}")
            res[sel].append(graph_time(lambda: kron_matmul(x, fac)))
    _C.kron_set_forward_kernel("")
    line = "  ".join(f"{s[4:] or s} {min(v):6.1f} ({100 * roof / min(v):4.1f}%) [{', '.join(f'{t:.1f}' for t in v)}]"
                     for s, v in res.items())
    print(f"{case:14s} roof {roof:6.1f} | {line}")
