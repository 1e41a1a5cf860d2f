"""Dense benchmark cases: sparsekern.matmul / matmul_transb against torch.matmul, fwd and bwd."""
from __future__ import annotations

import torch

from .. import matmul, matmul_transb
from ..testing import rel_error, tolerance
from . import Case, Tf32


def _dtypes(device):
    if device.type == "cpu":
        return [("fp32", torch.float32, False)]
    return [("fp32", torch.float32, False), ("tf32", torch.float32, True),
            ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)]


def cases(device: torch.device, quick: bool) -> list[Case]:
    out = []
    if device.type == "cuda":
        big = [("matmul", (8192, 4096), (4096, 4096), False),
               ("matmul_transb (QKᵀ)", (384, 512, 64), (384, 512, 64), True)]
    else:
        big = [("matmul", (512, 256), (256, 256), False),
               ("matmul_transb (QKᵀ)", (24, 128, 64), (24, 128, 64), True)]
    for label, dt, tf32 in _dtypes(device):
        mode = Tf32(tf32)
        for op, sa, sb, transb in big:
            a = torch.randn(*sa, device=device, dtype=dt)
            b = torch.randn(*sb, device=device, dtype=dt)
            ours_f = matmul_transb if transb else matmul
            def anchor_f(x, y, transb=transb):
                return torch.matmul(x, y.transpose(-1, -2)) if transb else torch.matmul(x, y)
            m, k = sa[-2], sa[-1]
            n = sb[-2] if transb else sb[-1]
            batch = 1
            for s in sa[:-2]:
                batch *= s
            flops = 2.0 * batch * m * n * k
            shape = f"{sa}·{sb}{'ᵀ' if transb else ''}"

            def verify(a=a, b=b, ours_f=ours_f, transb=transb, mode=mode):
                ref = a.double() @ (b.double().transpose(-1, -2) if transb else b.double())
                return rel_error(mode.wrap(lambda: ours_f(a, b))(), ref)

            tol = tolerance(dt, tf32)
            out.append(Case("dense", f"{op} fwd", shape, label,
                            mode.wrap(lambda a=a, b=b, f=ours_f: f(a, b)),
                            mode.wrap(lambda a=a, b=b, f=anchor_f: f(a, b)),
                            flops=flops, verify=verify, tol=tol))
            # Backward: both gradients (2 GEMMs of the forward's size).
            ag, bg = a.clone().requires_grad_(), b.clone().requires_grad_()
            go = torch.randn(*(sa[:-1] + (n,)), device=device, dtype=dt)
            y_ours = mode.wrap(lambda: ours_f(ag, bg))()
            y_ref = mode.wrap(lambda: anchor_f(ag, bg))()

            def bwd(y, ag=ag, bg=bg, go=go):
                return lambda: torch.autograd.grad(y, (ag, bg), go, retain_graph=True)

            out.append(Case("dense", f"{op} bwd", shape, label, mode.wrap(bwd(y_ours)), mode.wrap(bwd(y_ref)),
                            flops=2 * flops,
                            verify=lambda y_ours=y_ours, y_ref=y_ref, bwd=bwd: max(
                                rel_error(g1, g2.double()) for g1, g2 in zip(bwd(y_ours)(), bwd(y_ref)()))
                            , tol=tol * 4))
        if quick and device.type == "cpu":
            break
    # Host cost of the public API on a launch-bound product (autograd off).
    a = torch.randn(8, 64, device=device)
    b = torch.randn(64, 8, device=device)
    out.append(Case("dense", "host cost matmul (no grad)", "(8, 64)·(64, 8)", "fp32",
                    lambda: matmul(a, b), lambda: torch.matmul(a, b), host_cost=True,
                    verify=lambda: rel_error(matmul(a, b), a.double() @ b.double()),
                    tol=tolerance(torch.float32, device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32)))
    return out
