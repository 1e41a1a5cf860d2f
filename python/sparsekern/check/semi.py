"""Checks of the semi family: SemiStructuredLinear forward and backward against float64 references
(cuSPARSELt with float16/bfloat16 on CUDA; the dense fallback on the CPU)."""
from __future__ import annotations

import torch

from .. import SemiStructuredLinear
from ..testing import randn, rel_error, tolerance


def run(device: torch.device, quick: bool) -> list[dict]:
    rows = []
    g = torch.Generator().manual_seed(0)
    if device.type == "cuda":
        dtypes = [torch.float16] if quick else [torch.float16, torch.bfloat16]
        shapes = [(256, 512, 384), (7, 80, 24)]  # the second needs cuSPARSELt's padding to 16
    else:
        dtypes = [torch.float32] if quick else [torch.float64, torch.float32, torch.bfloat16]
        shapes = [(64, 96, 40), (7, 20, 12)]
    for dtype in dtypes:
        tol = tolerance(dtype)
        for m, in_f, out_f in shapes:
            torch.manual_seed(0)
            layer = SemiStructuredLinear(in_f, out_f, device=device, dtype=dtype)
            x = randn(m, in_f, dtype=dtype, device=device, generator=g).requires_grad_()
            y = layer(x)
            w64 = layer.weight.detach().double().requires_grad_()
            x64 = x.detach().double().requires_grad_()
            b64 = layer.bias.detach().double().requires_grad_()
            ref = torch.nn.functional.linear(x64, w64, b64)
            shape = f"({m}x{in_f}) → {out_f}"
            rows.append(dict(op="SemiStructuredLinear", dtype=str(dtype)[6:], shape=shape, rel_err=rel_error(y, ref), tol=tol))
            go = randn(*y.shape, dtype=dtype, device=device, generator=g)
            gx, gw = torch.autograd.grad(y, (x, layer.weight), go)
            rx, rw = torch.autograd.grad(ref, (x64, w64), go.double())
            rows.append(dict(op="SemiStructuredLinear.backward", dtype=str(dtype)[6:], shape=shape,
                             rel_err=max(rel_error(gx, rx), rel_error(gw, rw * layer.mask)), tol=2 * tol))
            if quick:
                break
    return rows
