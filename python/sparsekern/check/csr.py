"""Checks of the csr family: csr_matmul (forward, both gradients), csr_sddmm and SparseLinear
against float64 references on random patterns with empty rows."""
from __future__ import annotations

import torch

from .. import CSRMatrix, SparseLinear, csr_matmul, csr_sddmm
from ..testing import randn, rel_error, tolerance


def _pattern(rows, cols, density, dtype, device, g):
    dense = randn(rows, cols, dtype=torch.float64, generator=g)
    mask = torch.rand(rows, cols, generator=g) < density
    mask[::7] = False  # some empty rows
    dense = (dense * mask).to(dtype)
    return CSRMatrix.from_dense(dense.to(device)), dense.double().to(device)


def run(device: torch.device, quick: bool) -> list[dict]:
    rows = []
    g = torch.Generator().manual_seed(0)
    dtypes = [torch.float32, torch.float64] if quick else [torch.float64, torch.float32, torch.float16, torch.bfloat16]
    if device.type == "cpu":
        shapes = [(67, 131, 45, 0.1), (3, 40, 33, 17, 0.3)]
    else:
        shapes = [(1031, 1024, 257, 0.05), (4, 512, 300, 129, 0.1)]
    if quick:
        shapes = shapes[:1]
    for dtype in dtypes:
        tol = tolerance(dtype)
        name = str(dtype)[6:]
        for s in shapes:
            batch, (m, k, n, density) = (s[0], s[1:]) if len(s) == 5 else (None, s)
            a, a64 = _pattern(m, k, density, dtype, device, g)
            b = randn(*((batch,) if batch else ()), k, n, dtype=dtype, device=device, generator=g)
            shape = f"({m}x{k}, d={density})·{tuple(b.shape)}"
            values = a.values.clone().requires_grad_()
            bg = b.clone().requires_grad_()
            out = csr_matmul(a.with_values(values), bg)
            rows.append(dict(op="csr_matmul", dtype=name, shape=shape, rel_err=rel_error(out, a64 @ b.double()), tol=tol))
            go = randn(*out.shape, dtype=dtype, device=device, generator=g)
            gv, gb = torch.autograd.grad(out, (values, bg), go)
            ref_gb = a64.mT @ go.double()
            ref_gv = (go.double() @ b.double().mT)
            if batch:
                ref_gv = ref_gv.sum(0)
            ref_gv = ref_gv[a64 != 0]
            rows.append(dict(op="csr_matmul.backward", dtype=name, shape=shape,
                             rel_err=max(rel_error(gv, ref_gv), rel_error(gb, ref_gb)), tol=2 * tol))
            if batch is None:
                x = randn(m, 24, dtype=dtype, device=device, generator=g)
                y = randn(24, k, dtype=dtype, device=device, generator=g)
                s_out = csr_sddmm(x, y, a)
                rows.append(dict(op="csr_sddmm", dtype=name, shape=f"({m}x24)·(24x{k}) at {m}x{k} d={density}",
                                 rel_err=rel_error(s_out.values, (x.double() @ y.double())[a64 != 0]), tol=tol))
        lin = torch.nn.Linear(96, 80, device=device, dtype=dtype)
        layer = SparseLinear.from_dense(lin, 0.2)
        x = randn(5, 7, 96, dtype=dtype, device=device, generator=g)
        ref = torch.nn.functional.linear(x.double(), layer.weight.to_dense().double(), layer.bias.double())
        rows.append(dict(op="SparseLinear", dtype=name, shape="(5, 7, 96) → 80, d=0.2",
                         rel_err=rel_error(layer(x), ref), tol=tol))
    return rows
