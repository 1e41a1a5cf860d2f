"""CSR benchmark cases: csr_matmul against torch.sparse.mm (and dense cuBLAS), same inputs, same run.

Issue 6 target (H100/H200): fp32 4096×4096 (CSR) · 4096×4096 at densities 0.01–0.1, median time
at most torch.sparse.mm's, with no cuSPARSE planning or allocation after the first call: every row
records the planning calls and workspace allocations made by 20 warm calls (both must be 0).
"""
from __future__ import annotations

import torch

from .. import CSRMatrix, csr_matmul, csr_plan_stats
from ..testing import rel_error, tolerance
from . import Case


def _random_csr(n_rows: int, n_cols: int, density: float, dtype, device, g) -> torch.Tensor:
    """A torch sparse_csr tensor (int64 indices, like to_sparse_csr) with ~density·rows·cols entries."""
    nnz = max(1, int(round(density * n_rows * n_cols)))
    flat = torch.randperm(n_rows * n_cols, generator=g)[:nnz].sort().values
    rows, cols = flat // n_cols, flat % n_cols
    crow = torch.zeros(n_rows + 1, dtype=torch.int64)
    crow[1:] = torch.cumsum(torch.bincount(rows, minlength=n_rows), 0)
    values = torch.randn(nnz, generator=g, dtype=torch.float64).to(dtype)
    return torch.sparse_csr_tensor(crow, cols, values, (n_rows, n_cols), check_invariants=False).to(device)


def _planning_after_warmup(fn, calls: int = 20) -> dict:
    fn()
    before = csr_plan_stats()
    for _ in range(calls):
        fn()
    after = csr_plan_stats()
    planning = sum(after[k] - before[k] for k in ("plans_created", "buffer_size_queries", "preprocess_calls"))
    return {"planning_calls_after_warmup": planning,
            "workspace_allocations_after_warmup": after["workspace_allocations"] - before["workspace_allocations"],
            "warm_calls": calls}


def cases(device: torch.device, quick: bool) -> list[Case]:
    g = torch.Generator().manual_seed(0)
    out = []
    if device.type == "cuda" and not quick:
        grid = [(4096, 4096, 4096, d, dt) for dt in (torch.float32,) for d in (0.01, 0.02, 0.05, 0.1)]
        grid += [(4096, 4096, 4096, d, torch.float16) for d in (0.01, 0.1)]
    elif device.type == "cuda":
        grid = [(4096, 4096, 4096, 0.01, torch.float32), (4096, 4096, 4096, 0.1, torch.float32)]
    else:
        grid = [(512, 512, 128, 0.01, torch.float32), (512, 512, 128, 0.1, torch.float32)]
    for m, k, n, density, dtype in grid:
        a = _random_csr(m, k, density, dtype, device, g)
        b = torch.randn(k, n, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
        nnz = a.values().numel()
        label = str(dtype)[6:]
        shape = f"({m}x{k}, d={density})·({k}x{n})"

        def verify(a=a, b=b):
            return rel_error(csr_matmul(a, b), a.to_dense().double() @ b.double())

        def ours(a=a, b=b):
            return csr_matmul(a, b)

        extra = {"nnz": nnz, "density": density}
        extra.update(_planning_after_warmup(ours))
        flops = 2.0 * nnz * n
        moved = nnz * (a.values().element_size() + 8) + (k * n + m * n) * b.element_size()
        try:
            torch.sparse.mm(a, b)
            out.append(Case("csr", "csr_matmul fwd", shape, label, ours, lambda a=a, b=b: torch.sparse.mm(a, b),
                            anchor_name="torch.sparse.mm", flops=flops, bytes=moved, verify=verify,
                            tol=tolerance(dtype), extra=extra))
        except RuntimeError:  # torch has no sparse kernel for this dtype/device
            pass
        if density >= 0.05 or quick:
            dense = a.to_dense()
            out.append(Case("csr", "csr_matmul fwd", shape, label, ours, lambda d=dense, b=b: d @ b,
                            anchor_name="dense matmul (cuBLAS)" if device.type == "cuda" else "dense matmul",
                            flops=flops, bytes=moved, verify=verify, tol=tolerance(dtype), extra=dict(extra)))
    if device.type == "cuda" and not quick:
        # Training step of a sparse operand: forward + both gradients, against torch.sparse.mm's.
        m = k = n = 4096
        a = _random_csr(m, k, 0.05, torch.float32, device, g)
        b = torch.randn(k, n, device=device)
        crow, col, vals = a.crow_indices(), a.col_indices(), a.values()
        ours_v = vals.clone().requires_grad_()
        ours_b = b.clone().requires_grad_()
        torch_a = a.detach().clone().requires_grad_()
        go = torch.randn(m, n, device=device)

        def ours_step():
            y = csr_matmul(CSRMatrix(crow, col, ours_v, (m, k), validate=False), ours_b)
            return torch.autograd.grad(y, (ours_v, ours_b), go)

        def torch_step():
            y = torch.sparse.mm(torch_a, ours_b)
            return torch.autograd.grad(y, (torch_a, ours_b), go)

        def verify_step():
            gv, gb = ours_step()
            return max(rel_error(gb, a.to_dense().double().mT @ go.double()),
                       rel_error(gv, (go.double() @ b.double().mT)[a.to_dense() != 0]))

        try:
            torch_step()
            out.append(Case("csr", "csr_matmul fwd+bwd", "(4096x4096, d=0.05)·(4096x4096)", "fp32", ours_step,
                            torch_step, anchor_name="torch.sparse.mm fwd+bwd", flops=3 * 2.0 * vals.numel() * n,
                            verify=verify_step, tol=2 * tolerance(torch.float32),
                            extra=_planning_after_warmup(ours_step)))
        except RuntimeError:
            pass
    return out
