"""A few register-tile backward runs on CUDA checked against float64 (for compute-sanitizer:
memcheck / racecheck). Exits 1 on a wrong result. Usage: python kron_bwd_fast_check.py [small]"""
from __future__ import annotations

import math
import sys

import torch

from sparsekern import _C
from sparsekern import kron as K

dev = torch.device("cuda")
cases = [(16, [(32, 32), (32, 32)]), (37, [(32, 12), (4, 16)]), (19, [(64, 64), (64, 64)]),
         (23, [(16, 4), (40, 28)])]  # some p >= 32 in each: the register-tile forward keeps T0
sels = ["new", "new:stages=1", "new:tile=8,rows=2,grid=3", "new:rows=1,grid=2"]
if len(sys.argv) > 1:  # racecheck: also a capped grid (several tiles per block: the copies between them)
    cases, sels = cases[:2], [sels[0], sels[1], sels[3]]
bad = 0
for batch, shapes in cases:
    x = torch.randn(batch, math.prod(p for p, _ in shapes), device=dev)
    fs = [torch.randn(p, q, device=dev) / math.sqrt(p) for p, q in shapes]
    g = torch.randn(batch, math.prod(q for _, q in shapes), device=dev)
    x64, f64 = x.double().requires_grad_(), [f.double().requires_grad_() for f in fs]
    K.kron_reference(x64, f64).backward(g.double())
    for sel in sels:
        _C.kron_set_backward_kernel(sel)
        y, saved = K._forward(x, fs, save=True)
        for name, st in (("recompute", None), ("kept T0", saved)):
            out = K._backward(x, fs, g, [True] * 3, st)
            err = max(((a.double() - b).norm() / b.norm()).item()
                      for a, b in zip(out, [x64.grad] + [f.grad for f in f64]))
            ok = err < 1e-5 and (st is not None or name == "recompute")
            bad += not ok
            print(f"{batch}x{shapes} {sel} {name}: max rel err {err:.1e} {'ok' if ok else 'WRONG'}", flush=True)
_C.kron_set_backward_kernel("")
torch.cuda.synchronize()
sys.exit(1 if bad else 0)
