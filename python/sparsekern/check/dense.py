"""Checks of the dense family: matmul / matmul_transb forward and backward."""
from __future__ import annotations

import torch

from .. import matmul, matmul_transb
from ..testing import randn, rel_error, tolerance


def run(device: torch.device, quick: bool) -> list[dict]:
    rows = []
    g = torch.Generator().manual_seed(0)
    dtypes = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
    if device.type == "cpu":
        shapes = [((4, 67, 131), (131, 45)), ((3, 2, 33, 16), (3, 2, 16, 40))]
    else:
        shapes = [((4, 257, 511), (511, 129)), ((8, 12, 128, 64), (8, 12, 64, 128))]
    tf32 = device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32
    for dtype in dtypes:
        for sa, sb in shapes:
            a = randn(*sa, dtype=dtype, device=device, generator=g).requires_grad_()
            b = randn(*sb, dtype=dtype, device=device, generator=g).requires_grad_()
            a64, b64 = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
            for name, fn, bb, bb64 in (("matmul", matmul, b, b64),
                                       ("matmul_transb", matmul_transb, b.detach().mT.contiguous().requires_grad_(), None)):
                if bb64 is None:
                    bb64 = bb.detach().double().requires_grad_()
                    ref = a64 @ bb64.mT
                else:
                    ref = a64 @ bb64
                out = fn(a, bb)
                tol = tolerance(dtype, tf32)
                shape = f"{tuple(sa)}x{tuple(bb.shape)}"
                rows.append(dict(op=name, dtype=str(dtype)[6:], shape=shape, rel_err=rel_error(out, ref), tol=tol))
                go = randn(*out.shape, dtype=dtype, device=device, generator=g)
                ga, gb = torch.autograd.grad(out, (a, bb), go)
                ra, rb = torch.autograd.grad(ref, (a64, bb64), go.double())
                rows.append(dict(op=name + ".backward", dtype=str(dtype)[6:], shape=shape,
                                 rel_err=max(rel_error(ga, ra), rel_error(gb, rb)), tol=tol))
            if quick:
                break
    return rows
