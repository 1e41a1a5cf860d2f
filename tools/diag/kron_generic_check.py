"""The generic fused kron kernels (kron_tile.h) on CUDA, fp32 and fp64, forward and native backward
against float64 (for compute-sanitizer memcheck after their cp.async copies). Exits 1 if wrong."""
from __future__ import annotations

import math
import sys

import torch

from sparsekern import kron as K

dev = torch.device("cuda")
bad = 0
for batch, shapes in [(37, [(16, 16)] * 3), (29, [(8, 8)] * 4), (3, [(16, 16)] * 4), (9, [(32, 32)] * 3),
                      (11, [(8, 7), (5, 12)])]:
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(batch, math.prod(p for p, _ in shapes), device=dev, dtype=dtype)
        fs = [torch.randn(p, q, device=dev, dtype=dtype) / math.sqrt(p) for p, q in shapes]
        g = torch.randn(batch, math.prod(q for _, q in shapes), device=dev, dtype=dtype)
        x64, f64 = x.double().requires_grad_(), [f.double().requires_grad_() for f in fs]
        y64 = K.kron_reference(x64, f64)
        y64.backward(g.double())
        y = K._forward(x, fs)
        out = [y] + K._backward(x, fs, g, [True] * (len(fs) + 1))
        ref = [y64.detach()] + [x64.grad] + [f.grad for f in f64]
        err = max(((a.double() - b).norm() / b.norm()).item() for a, b in zip(out, ref))
        ok = err < (1e-5 if dtype == torch.float32 else 1e-12)
        bad += not ok
        print(f"{batch}x{shapes} {dtype}: max rel err {err:.1e} {'ok' if ok else 'WRONG'}", flush=True)
torch.cuda.synchronize()
sys.exit(1 if bad else 0)
