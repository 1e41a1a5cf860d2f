"""Checks of the in-place family against float64 references: softmax (masked rows included), its
backward, layer_norm, rms_norm, square_matmul and inplace_linear, each on fresh copies."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import (inplace_layer_norm, inplace_linear, inplace_rms_norm, inplace_softmax, inplace_softmax_backward,
                square_matmul)
from ..testing import randn, rel_error, tolerance


def _ref_softmax(x64: torch.Tensor) -> torch.Tensor:
    m = x64.amax(-1, keepdim=True)
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(x64 - m)
    s = e.sum(-1, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))


def run(device: torch.device, quick: bool) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    dtypes = [torch.float32, torch.float16, torch.bfloat16] + ([] if quick else [torch.float64])
    if device.type == "cpu":
        row_shapes = [(37, 1000)] if quick else [(37, 1000), (3, 4097), (2, 131072)]
        mm_shapes = [(300, 64)]
    else:
        row_shapes = [(4, 12, 128, 512)] if quick else [(4, 12, 128, 512), (1024, 4097), (16, 262144)]
        mm_shapes = [(4096, 1024)] if quick else [(4096, 1024), (3000, 777)]
    tf32 = device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32
    rows = []

    def add(op, dtype, shape, err, tol):
        shape = shape if isinstance(shape, str) else str(tuple(shape))
        rows.append(dict(op=op, dtype=str(dtype)[6:], shape=shape, rel_err=err, tol=tol))

    for dtype in dtypes:
        tol = tolerance(dtype)
        for shape in row_shapes:
            n = shape[-1]
            # softmax with a -inf mask on every 7th column and one fully masked row
            x = (randn(*shape, dtype=torch.float64, generator=g) * 4)
            x[..., ::7] = -math.inf
            x.view(-1, n)[0] = -math.inf
            x = x.to(dtype=dtype, device=device)
            ref = _ref_softmax(x.double())
            add("inplace_softmax", dtype, shape, rel_error(inplace_softmax(x), ref), tol)

            y = torch.softmax(randn(*shape, dtype=torch.float64, generator=g), -1).to(dtype=dtype, device=device)
            go = randn(*shape, dtype=dtype, device=device, generator=g)
            y64, g64 = y.double(), go.double()
            ref = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True))
            out = inplace_softmax_backward(go, y)
            err = ((out.double() - ref).norm() / (y64 * g64).norm().clamp_min(1e-30)).item()
            add("inplace_softmax_backward", dtype, shape, err if math.isfinite(err) else math.inf, tol)

            x = (randn(*shape, dtype=torch.float64, generator=g) + 3).to(dtype=dtype, device=device)
            w = randn(n, dtype=dtype, device=device, generator=g)
            b = randn(n, dtype=dtype, device=device, generator=g)
            ref = F.layer_norm(x.double(), (n,), w.double(), b.double())
            add("inplace_layer_norm", dtype, shape, rel_error(inplace_layer_norm(x, (n,), w, b), ref), tol)

            x = randn(*shape, dtype=dtype, device=device, generator=g)
            eps = torch.finfo(dtype).eps
            ref = x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + eps) * w.double()
            add("inplace_rms_norm", dtype, shape, rel_error(inplace_rms_norm(x, (n,), w), ref), tol)
        with torch.no_grad():
            for shape in mm_shapes:
                n = shape[-1]
                x = randn(*shape, dtype=dtype, device=device, generator=g)
                w = randn(n, n, dtype=dtype, device=device, generator=g) / math.sqrt(n)
                ref = x.double() @ w.double()
                add("square_matmul", dtype, f"{shape}·({n}, {n})", rel_error(square_matmul(x, w), ref),
                    tolerance(dtype, tf32))
                lin = torch.nn.Linear(n, n).to(device=device, dtype=dtype)
                x = randn(*shape, dtype=dtype, device=device, generator=g)
                ref = F.linear(x.double(), lin.weight.double(), lin.bias.double())
                add("inplace_linear", dtype, f"{shape}·({n}, {n})ᵀ+b", rel_error(inplace_linear(x, lin), ref),
                    tolerance(dtype, tf32))
    return rows
