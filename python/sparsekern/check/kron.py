"""Checks of the Kronecker family: kron_matmul forward, backward (every gradient) and left product
against float64 references (explicit torch.kron when small, factor at a time otherwise)."""
from __future__ import annotations

import functools
import math

import torch

from ..kron import kron_matmul, kron_reference
from ..testing import randn, rel_error, tolerance


def _reference(x64, f64):
    if math.prod(f.shape[0] for f in f64) * math.prod(f.shape[1] for f in f64) <= 1 << 22:
        return x64 @ functools.reduce(torch.kron, f64)
    return kron_reference(x64, f64)


def run(device: torch.device, quick: bool) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    dtypes = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
    if device.type == "cpu":
        cases = [(7, [(3, 5), (7, 2), (2, 4)]), (3, [(8, 8)] * 3), (2, [(130, 3), (3, 4)])]
    else:
        cases = [(1024, [(8, 8)] * 4), (256, [(16, 16)] * 4), (1024, [(64, 64)] * 2),
                 (64, [(128, 128)] * 2), (33, [(3, 5), (7, 2), (24, 24), (2, 4)])]
    if quick:
        dtypes, cases = dtypes[:2], cases[:2]
    tf32 = device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32
    rows = []
    for dtype in dtypes:
        tol = tolerance(dtype, tf32)
        for batch, shapes in cases:
            shape = f"{batch}x[{' '.join(f'{p}x{q}' for p, q in shapes)}]"
            P = math.prod(p for p, _ in shapes)
            x = randn(batch, P, dtype=dtype, device=device, generator=g).requires_grad_()
            # Factors scaled by 1/√p keep every state O(1) (as the bench's): unscaled, the exact
            # ∂ℓ/∂F of 256x[16x16]^4 reaches ~2e5, past float16's range, so no fp16 result can match.
            fs = [(randn(p, q, dtype=dtype, device=device, generator=g) / math.sqrt(p)).requires_grad_()
                  for p, q in shapes]
            x64 = x.detach().double().requires_grad_()
            f64 = [f.detach().double().requires_grad_() for f in fs]
            y, ref = kron_matmul(x, fs), _reference(x64, f64)
            rows.append(dict(op="kron_matmul", dtype=str(dtype)[6:], shape=shape, rel_err=rel_error(y, ref), tol=tol))
            gy = randn(*y.shape, dtype=dtype, device=device, generator=g)
            got = torch.autograd.grad(y, [x, *fs], gy)
            want = torch.autograd.grad(ref, [x64, *f64], gy.double())
            rows.append(dict(op="kron_matmul.backward", dtype=str(dtype)[6:], shape=shape,
                             rel_err=max(rel_error(a, b) for a, b in zip(got, want)), tol=4 * tol))
        # (F1 ⊗ … ⊗ Fn) · z on transposed views.
        fs = [randn(p, q, dtype=dtype, device=device, generator=g) for p, q in [(3, 4), (5, 2), (2, 3)]]
        z = randn(24, 9, dtype=dtype, device=device, generator=g)
        ref = functools.reduce(torch.kron, [f.double() for f in fs]) @ z.double()
        rows.append(dict(op="kron_matmul(left)", dtype=str(dtype)[6:], shape="[3x4 5x2 2x3]·24x9",
                         rel_err=rel_error(kron_matmul(fs, z, left=True), ref), tol=tol))
    return rows
