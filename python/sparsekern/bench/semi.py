"""2:4 benchmark cases: SemiStructuredLinear forward against dense cuBLAS (F.linear with the masked
weight) and torch's 2:4 path (to_sparse_semi_structured + F.linear), same inputs, same run.

Issue 6 target (H100/H200): forward at 8192×4096×4096 (tokens × in × out), fp16 and bf16, at most
0.85× the dense cuBLAS time. Rows also record the cuSPARSELt plans, searches and compressions made
by 20 warm calls (all must be 0).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import SemiStructuredLinear, semi_plan_stats
from ..semi import cusparselt_enabled
from ..testing import rel_error, tolerance
from . import Case


def _work_after_warmup(fn, calls: int = 20) -> dict:
    fn()
    before = semi_plan_stats()
    for _ in range(calls):
        fn()
    after = semi_plan_stats()
    keys = ("plans_created", "searches", "compressions", "workspace_allocations", "tunings")
    return {"planning_after_warmup": sum(after[k] - before[k] for k in keys), "warm_calls": calls}


def _torch_semi_structured(w: torch.Tensor):
    """torch's own 2:4 weight, or None where this torch/GPU has no 2:4 kernel for it."""
    try:
        from torch.sparse import to_sparse_semi_structured

        return to_sparse_semi_structured(w)
    except Exception:  # noqa: BLE001 - any failure means "no anchor on this setup"
        return None


def cases(device: torch.device, quick: bool) -> list[Case]:
    g = torch.Generator().manual_seed(0)
    out = []
    if device.type == "cuda" and not cusparselt_enabled():
        # Without cuSPARSELt the CUDA forward is the dense fallback: timing it against dense would
        # say nothing about 2:4. See sparsekern.semi.cusparselt_enabled().
        print("bench semi: skipped on CUDA (cuSPARSELt unavailable or SPARSEKERN_SEMI_BACKEND=dense)")
        return out
    if device.type == "cuda":
        grid = [(8192, 4096, 4096)] if not quick else [(2048, 1024, 1024)]
        if not quick:
            grid.append((16, 4096, 4096))  # decode-sized input: cuSPARSELt pads M to 16
        dtypes = [torch.float16, torch.bfloat16]
    else:
        grid, dtypes = [(256, 512, 256)], [torch.float32]
    for m, in_f, out_f in grid:
        for dtype in dtypes:
            label = str(dtype)[6:]
            torch.manual_seed(0)
            layer = SemiStructuredLinear(in_f, out_f, device=device, dtype=dtype).requires_grad_(False)
            x = torch.randn(m, in_f, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
            w_masked = (layer.weight * layer.mask).contiguous()
            bias = layer.bias
            shape = f"{m}x{in_f}→{out_f}"
            flops = 2.0 * m * in_f * out_f  # dense-equivalent work, so TFLOP/s compare across rows

            def verify(layer=layer, x=x, w=w_masked, b=bias):
                return rel_error(layer(x), F.linear(x.double(), w.double(), b.double()))

            def ours(layer=layer, x=x):
                with torch.no_grad():
                    return layer(x)

            extra = _work_after_warmup(ours) if device.type == "cuda" else {}
            if device.type == "cuda":
                from ..semi import search_report

                report = search_report()
                extra["path"] = report[-1]["chosen"] if report else "?"  # which kernel (or dense) won
            out.append(Case("semi", "SemiStructuredLinear fwd", shape, label, ours,
                            lambda x=x, w=w_masked, b=bias: F.linear(x, w, b),
                            anchor_name="dense F.linear (cuBLAS)" if device.type == "cuda" else "dense F.linear",
                            flops=flops, verify=verify, tol=tolerance(dtype), extra=extra))
            if device.type == "cuda":
                w_semi = _torch_semi_structured(w_masked)
                if w_semi is not None:
                    try:
                        F.linear(x, w_semi, bias)
                        out.append(Case("semi", "SemiStructuredLinear fwd", shape, label, ours,
                                        lambda x=x, w=w_semi, b=bias: F.linear(x, w, b),
                                        anchor_name="torch to_sparse_semi_structured + F.linear",
                                        flops=flops, verify=verify, tol=tolerance(dtype), extra=dict(extra)))
                    except Exception:  # noqa: BLE001
                        pass
        if quick:
            break
    if device.type == "cuda" and not quick:
        # Training step (forward + dense-fallback backward) against the dense layer's.
        m, in_f, out_f = 8192, 4096, 4096
        torch.manual_seed(0)
        layer = SemiStructuredLinear(in_f, out_f, device=device, dtype=torch.float16)
        dense_w = (layer.weight.detach() * layer.mask).clone().requires_grad_()
        dense_b = layer.bias.detach().clone().requires_grad_()
        x = torch.randn(m, in_f, device=device, dtype=torch.float16, requires_grad=True)
        go = torch.randn(m, out_f, device=device, dtype=torch.float16)

        def ours_step():
            return torch.autograd.grad(layer(x), (x, layer.weight, layer.bias), go)

        def dense_step():
            return torch.autograd.grad(F.linear(x, dense_w, dense_b), (x, dense_w, dense_b), go)

        def verify_step():
            gx, gw, gb = ours_step()
            rx, rw, rb = dense_step()
            return max(rel_error(gx, rx), rel_error(gw, rw * layer.mask), rel_error(gb, rb))

        out.append(Case("semi", "SemiStructuredLinear fwd+bwd", f"{m}x{in_f}→{out_f}", "float16", ours_step,
                        dense_step, anchor_name="dense F.linear fwd+bwd", flops=3 * 2.0 * m * in_f * out_f,
                        verify=verify_step, tol=2 * tolerance(torch.float16)))
    return out
