"""Kronecker benchmark cases: sparsekern.kron_matmul against torch one factor at a time (v2:
reshape, matmul, transpose), forward and backward (all gradients), fp32 with TF32 off.

The full grid is issue 5's target table. Each row carries the roofline of its case,
max(FLOPs / fp32 peak, minimal bytes / copy bandwidth), with both ceilings measured on this device
in the same run (a large TF32-off SGEMM and a large copy), and the execution plan used. On CUDA
each row also carries the device time per call of both sides (device_ms_ours / device_ms_anchor:
calls replayed from a CUDA graph, without the host's per-call work, which dominates the eager time
of the small cases). Backward rows capture `torch.autograd.grad` on a graph built, from leaves of
its own, on the capture stream: autograd runs each backward op on its forward op's stream (and a
leaf's gradient node on the stream of the first graph that used it), so a graph built on the
default stream made session 6's captures fail (cudaErrorStreamCaptureInvalidated).

When FastKron's Python package (pyfastkron 1.1, built from source for the GPU; the 1.1.0 wheel
crashed on an H200 with CUDA 13) is importable with its CUDA backend loaded, each full-grid case
also gets a forward and a backward row against FastKron (anchor "FastKron 1.1", extra
bench="fwd_fastkron" / "bwd_fastkron"; its result verified against float64). Eager times only:
FastKron launches on the stream that was current when it was imported, so its calls cannot be
captured into a graph on another stream.
"""
from __future__ import annotations

import math

import torch

from .. import _C
from .._core import as_dlpack
from ..kron import kron_matmul, kron_reference
from ..kron_cli import min_bytes, shuffle_flops
from ..testing import randn, rel_error, tolerance
from . import Case, time_ms, Tf32

FULL = [(16, [32, 32]), (32, [128, 128]), (1024, [32, 32]), (1024, [64, 64]), (1024, [128, 128]),
        (1024, [16, 16, 16]), (1024, [8, 8, 8, 8]), (256, [16, 16, 16, 16]), (4096, [64, 64]),
        (128, [32, 32, 32])]
QUICK = [(64, [8, 8, 8]), (32, [16, 16])]


def _fastkron():
    """pyfastkron's torch front end when its CUDA backend loaded, else None (an optional peer for
    the side-by-side rows; without its native module pyfastkron silently falls back to torch ops,
    which would not be FastKron)."""
    try:
        from pyfastkron import fastkronbase  # type: ignore
        import pyfastkron.fastkrontorch as fk  # type: ignore
    except Exception:  # noqa: BLE001 - not installed, or a build that does not load: no rows
        return None
    return fk if fastkronbase.fastkronCUDA is not None else None


def _fastkron_cases(fk, x, fs, shape, mode, flops, nbytes, tol, extra) -> list[Case]:
    """Forward and backward of ours against FastKron for one case (eager times; see the module doc)."""
    x64, f64 = x.double(), [f.double() for f in fs]

    def verify_fwd():
        return rel_error(mode.wrap(lambda: fk.gemkm(x, fs))(), kron_reference(x64, f64))

    out = [Case("kron", "kron_matmul fwd", shape, "fp32", mode.wrap(lambda: kron_matmul(x, fs)),
                mode.wrap(lambda: fk.gemkm(x, fs)), anchor_name="FastKron 1.1", flops=flops, bytes=nbytes,
                verify=verify_fwd, tol=tol, extra=dict(extra, bench="fwd_fastkron"))]
    xo, fo = x.clone().requires_grad_(), [f.clone().requires_grad_() for f in fs]
    xf, ff = x.clone().requires_grad_(), [f.clone().requires_grad_() for f in fs]
    gy = randn(*x.shape[:-1], math.prod(f.shape[1] for f in fs), dtype=x.dtype, device=x.device)
    y_ours = mode.wrap(lambda: kron_matmul(xo, fo))()
    y_fk = mode.wrap(lambda: fk.gemkm(xf, ff))()

    def verify_bwd():
        got = torch.autograd.grad(y_fk, [xf, *ff], gy, retain_graph=True)
        x6, f6 = x64.clone().requires_grad_(), [f.clone().requires_grad_() for f in f64]
        want = torch.autograd.grad(kron_reference(x6, f6), [x6, *f6], gy.double())
        return max(rel_error(a, b) for a, b in zip(got, want))

    out.append(Case("kron", "kron_matmul bwd", shape, "fp32",
                    mode.wrap(lambda: torch.autograd.grad(y_ours, [xo, *fo], gy, retain_graph=True)),
                    mode.wrap(lambda: torch.autograd.grad(y_fk, [xf, *ff], gy, retain_graph=True)),
                    anchor_name="FastKron 1.1", flops=2 * flops, bytes=2 * nbytes, verify=verify_bwd,
                    tol=4 * tol, extra=dict(extra, bench="bwd_fastkron")))
    return out


def _ceilings(device: torch.device) -> dict:
    """Measured fp32 (TF32 off) GEMM throughput and device-to-device copy bandwidth."""
    n = 8192
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    mm = Tf32(False).wrap(lambda: a @ b)
    t_mm = time_ms(mm, device)
    src = torch.empty(1 << 28, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    t_cp = time_ms(lambda: dst.copy_(src), device)
    return {"fp32_tflops": 2 * n**3 / t_mm / 1e9, "copy_tbps": 2 * src.numel() / t_cp / 1e9}


def _plan(x, fs, backward: bool) -> str:
    return _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], backward).replace("\n", "; ")


def cases(device: torch.device, quick: bool) -> list[Case]:
    grid = QUICK if quick or device.type == "cpu" else FULL
    ceil = _ceilings(device) if device.type == "cuda" and not quick else None
    dtype = torch.float32
    mode = Tf32(False)
    fk = _fastkron() if device.type == "cuda" and not quick else None
    out = []
    g = torch.Generator().manual_seed(0)
    for batch, sizes in grid:
        shapes = [(s, s) for s in sizes]
        P = math.prod(sizes)
        x = randn(batch, P, dtype=dtype, device=device, generator=g)
        # Scaled so that values stay O(1) through every factor.
        fs = [randn(p, q, dtype=dtype, device=device, generator=g) / math.sqrt(p) for p, q in shapes]
        flops = shuffle_flops(batch, shapes)
        nbytes = min_bytes(batch, shapes, dtype)
        shape = f"{batch}x[{' '.join(str(s) for s in sizes)}]"
        tol = tolerance(dtype)
        extra = {"plan": _plan(x, fs, False)}
        if ceil is not None:
            roof_ms = max(flops / (ceil["fp32_tflops"] * 1e9), nbytes / (ceil["copy_tbps"] * 1e9))
            extra.update(roofline_ms=roof_ms, **ceil)

        x64, f64 = x.double(), [f.double() for f in fs]

        def verify_fwd(x=x, fs=fs, x64=x64, f64=f64):
            return rel_error(mode.wrap(lambda: kron_matmul(x, fs))(), kron_reference(x64, f64))

        out.append(Case("kron", "kron_matmul fwd", shape, "fp32",
                        mode.wrap(lambda x=x, fs=fs: kron_matmul(x, fs)),
                        mode.wrap(lambda x=x, fs=fs: kron_reference(x, fs)),
                        anchor_name="torch per factor (v2)", flops=flops, bytes=nbytes,
                        verify=verify_fwd, tol=tol, extra=dict(extra), device_time=True))

        # Backward: ∂ℓ/∂x and every ∂ℓ/∂F from a graph built once (the forward is not timed).
        xg = x.clone().requires_grad_()
        fg = [f.clone().requires_grad_() for f in fs]
        gy = randn(batch, math.prod(q for _, q in shapes), dtype=dtype, device=device, generator=g)
        y_ours = mode.wrap(lambda: kron_matmul(xg, fg))()
        y_ref = mode.wrap(lambda: kron_reference(xg, fg))()

        def bwd(y, xg=xg, fg=fg, gy=gy):
            return lambda: torch.autograd.grad(y, [xg, *fg], gy, retain_graph=True)

        def verify_bwd(y_ours=y_ours, xg=xg, fg=fg, gy=gy, bwd=bwd):
            got = mode.wrap(bwd(y_ours))()
            x64g = xg.detach().double().requires_grad_()
            f64g = [f.detach().double().requires_grad_() for f in fg]
            want = torch.autograd.grad(kron_reference(x64g, f64g), [x64g, *f64g], gy.double())
            return max(rel_error(a, b) for a, b in zip(got, want))

        bextra = dict(extra, plan=_plan(x, fs, True))
        if ceil is not None:  # the backward does about twice the forward's arithmetic and traffic
            bextra["roofline_ms"] = 2 * extra["roofline_ms"]
        # Device time of the backward: a second pair of graphs, with leaves of their own, built on
        # the capture stream. Autograd runs each backward op on its forward op's stream, and a
        # leaf's gradient node keeps the stream of the first graph that used it; with any of
        # these on the default stream the capture is invalidated.
        dev_kw = {}
        if device.type == "cuda":
            cap = torch.cuda.Stream(device)
            cap.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(cap):
                xc = x.clone().requires_grad_()
                fc = [f.clone().requires_grad_() for f in fs]
                y_ours_cap = mode.wrap(lambda: kron_matmul(xc, fc))()
                y_ref_cap = mode.wrap(lambda: kron_reference(xc, fc))()
            torch.cuda.current_stream(device).wait_stream(cap)
            dev_kw = dict(device_time=True, graph_stream=cap,
                          device_fns=(mode.wrap(bwd(y_ours_cap, xc, fc)), mode.wrap(bwd(y_ref_cap, xc, fc))))
        out.append(Case("kron", "kron_matmul bwd", shape, "fp32", mode.wrap(bwd(y_ours)), mode.wrap(bwd(y_ref)),
                        anchor_name="torch per factor (v2)", flops=2 * flops, bytes=2 * nbytes,
                        verify=verify_bwd, tol=4 * tol, extra=bextra, **dev_kw))
        if fk is not None:
            out += _fastkron_cases(fk, x, fs, shape, mode, flops, nbytes, tol, extra)
    return out
