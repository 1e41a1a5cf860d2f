"""Checks of the block-sparse family: dds / dsd / sdd (both orientations of the sparse operand),
their gradients and BlockSparseLinear, against float64 dense references with the pattern applied."""
from __future__ import annotations

import torch

from .. import BlockSparseLinear, BlockSparseMatrix, bsr
from ..testing import randn, rel_error, tolerance


def run(device: torch.device, quick: bool) -> list[dict]:
    rows = []
    g = torch.Generator().manual_seed(0)
    tf32 = device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32
    dtypes = [torch.float32, torch.bfloat16] if quick else [torch.float64, torch.float32, torch.float16, torch.bfloat16]
    if device.type == "cpu":
        cells = [(67, 128, 192, 32, 0.4), (5, 256, 128, 64, 0.3)]   # (m, k, n, block, density)
    else:
        cells = [(1031, 1024, 768, 64, 0.3), (129, 512, 1024, 128, 0.25), (7, 512, 256, 32, 0.5)]
    if quick:
        cells = cells[:1]
    for dtype in dtypes:
        name = str(dtype)[6:]
        tol = tolerance(dtype, tf32)
        for m, k, n, block, density in cells:
            s = BlockSparseMatrix.random((k, n), block, density, dtype=dtype, generator=g).to(device)
            s64 = s.to(torch.float64).to_dense()
            shape = f"({m}x{k})·({k}x{n}, b={block}, d={s.density:.2f})"
            vals = s.values.clone().requires_grad_()
            x = randn(m, k, dtype=dtype, device=device, generator=g).requires_grad_()
            out = bsr.dds(x, s.with_values(vals))
            rows.append(dict(op="dds", dtype=name, shape=shape, rel_err=rel_error(out, x.double() @ s64), tol=tol))
            go = randn(m, n, dtype=dtype, device=device, generator=g)
            gx, gv = torch.autograd.grad(out, (x, vals), go)
            v64 = vals.detach().double().requires_grad_()
            x64 = x.detach().double().requires_grad_()
            rx, rv = torch.autograd.grad(x64 @ s.with_values(v64).to_dense(), (x64, v64), go.double())
            rows.append(dict(op="dds.backward", dtype=name, shape=shape,
                             rel_err=max(rel_error(gx, rx), rel_error(gv, rv)), tol=4 * tol))
            xt = randn(m, n, dtype=dtype, device=device, generator=g)
            rows.append(dict(op="dds (Sᵀ)", dtype=name, shape=f"({m}x{n})·Sᵀ",
                             rel_err=rel_error(bsr.dds(xt, s.t()), xt.double() @ s64.t()), tol=tol))
            y = randn(n, m, dtype=dtype, device=device, generator=g)
            rows.append(dict(op="dsd", dtype=name, shape=f"S·({n}x{m})",
                             rel_err=rel_error(bsr.dsd(s, y), s64 @ y.double()), tol=tol))
            yt = randn(k, m, dtype=dtype, device=device, generator=g)
            rows.append(dict(op="dsd (Sᵀ)", dtype=name, shape=f"Sᵀ·({k}x{m})",
                             rel_err=rel_error(bsr.dsd(s.t(), yt), s64.t() @ yt.double()), tol=tol))
            a = randn(k, m, dtype=dtype, device=device, generator=g)
            b = randn(m, n, dtype=dtype, device=device, generator=g)
            mask = s.mask().repeat_interleave(block, 0).repeat_interleave(block, 1)
            rows.append(dict(op="sdd", dtype=name, shape=f"({k}x{m})·({m}x{n}) on S",
                             rel_err=rel_error(bsr.sdd(a, b, s).to_dense(), (a.double() @ b.double()) * mask), tol=tol))
        layer = BlockSparseLinear(256, 128, density=0.3, block_size=32, device=device, dtype=dtype)
        xl = randn(3, 5, 256, dtype=dtype, device=device, generator=g)
        ref = torch.nn.functional.linear(xl.double(), layer.dense_weight().detach().double(), layer.bias.detach().double())
        rows.append(dict(op="BlockSparseLinear", dtype=name, shape="(3, 5, 256) → 128, b=32, d=0.3",
                         rel_err=rel_error(layer(xl), ref), tol=tol))
    return rows
