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
bench="fwd_fastkron" / "bwd_fastkron"; its result verified against float64). Its backward is
torch matmuls over the intermediates its forward kept (pyfastkron 1.1 has no backward kernels).
The fwd_fastkron rows name the kernels of one FastKron call (anchor_kernels). FastKron launches on
the stream that was current when it was imported, so its calls cannot be captured into a graph on
another stream: these rows' device times (device_method "kernels") are both sides' summed kernel
durations from the profiler, without the gaps between kernels that the graph times of the v2 rows
include.

``python -m sparsekern.bench.kron bench.json`` prints issue 5's numbers from a full-grid JSON
(see :func:`summarize`).
"""
from __future__ import annotations

import math
import sys

import torch

from .. import _C
from .._core import as_dlpack
from ..kron import kron_matmul, kron_reference
from ..kron_cli import min_bytes, shuffle_flops
from ..testing import randn, rel_error, tolerance
from . import Case, copy_tbps, gpu_events, time_ms, Tf32

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
    if fastkronbase.fastkronCUDA is None:
        return None
    if fastkronbase.fastkronX86 is None:
        # pyfastkron 1.1 runs its own kernels only where FastKronBase.supportedProcessor holds, which
        # asks for the x86 backend even for CUDA tensors; a build with the CUDA backend alone would
        # silently take the torch fallback (session 12's first FastKron rows did, and matched v2's
        # times). The flag only gates that check: CUDA tensors go to the CUDA backend.
        fk.fastkrontorch.x86 = True
    return fk


_PROBE = r"""
import math, sys, torch
from sparsekern.bench.kron import _fastkron
from sparsekern.kron import kron_reference
fk = _fastkron()
torch.backends.cuda.matmul.allow_tf32 = False
for case in sys.argv[1:]:
    batch, sizes = case.split(":")
    ps = [int(p) for p in sizes.split(",")]
    print("start", case, flush=True)
    x = torch.randn(int(batch), math.prod(ps), device="cuda")
    fs = [torch.randn(p, p, device="cuda") / math.sqrt(p) for p in ps]
    y = fk.gemkm(x, fs)
    ref = kron_reference(x.double(), [f.double() for f in fs])
    err = ((y.double() - ref).norm() / ref.norm()).item()
    print("done", case, err, flush=True)
"""


def _fastkron_probe(grid) -> dict:
    """{(batch, sizes): None if FastKron's forward ran and agreed with float64 to 1e-4, else why not},
    from child processes: a FastKron kernel that crashes (pyfastkron 1.1 built for sm_90 segfaulted
    in session 12) must not take the benchmark down. One child runs the cases in order; after a
    crash the next child starts at the case after it."""
    import os
    import subprocess

    keys = [f"{b}:{','.join(map(str, sz))}" for b, sz in grid]
    status: dict = {}
    i = 0
    while i < len(keys):
        try:
            res = subprocess.run([sys.executable, "-c", _PROBE, *keys[i:]], capture_output=True, text=True,
                                 timeout=300, env=dict(os.environ))
            out, code = res.stdout, res.returncode
        except subprocess.TimeoutExpired as e:
            out, code = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
        started = None
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "start":
                started = parts[1]
            elif len(parts) == 3 and parts[0] == "done":
                err = float(parts[2])
                status[parts[1]] = None if err <= 1e-4 else f"relative error {err:.2e} against float64"
                started = None
        if started is None:  # every case it started finished; a failure before the first case
            for k in keys[i:]:
                status.setdefault(k, f"probe exited with {code} before this case")
            break
        status[started] = f"FastKron's forward crashed (exit {code})"
        i = keys.index(started) + 1
    return {(b, tuple(sz)): status.get(k, "not probed") for (b, sz), k in zip(grid, keys)}


def _fastkron_cases(fk, x, fs, shape, mode, flops, nbytes, tol, extra) -> list[Case]:
    """Forward and backward of ours against FastKron for one case (eager times; see the module doc)."""
    if not fk.fastkrontorch.isSupported(x, fs):  # it would run torch ops, not FastKron
        return []
    x64, f64 = x.double(), [f.double() for f in fs]
    # Which code ran: the names of the GPU activities of one FastKron call.
    extra = dict(extra, anchor_kernels=[e.name[:80] for e in gpu_events(lambda: fk.gemkm(x, fs), x.device, 1, 1)])

    def verify_fwd():
        return rel_error(mode.wrap(lambda: fk.gemkm(x, fs))(), kron_reference(x64, f64))

    out = [Case("kron", "kron_matmul fwd", shape, "fp32", mode.wrap(lambda: kron_matmul(x, fs)),
                mode.wrap(lambda: fk.gemkm(x, fs)), anchor_name="FastKron 1.1", flops=flops, bytes=nbytes,
                verify=verify_fwd, tol=tol, extra=dict(extra, bench="fwd_fastkron"),
                device_time=True, device_method="kernels")]
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
                    tol=4 * tol, extra=dict(extra, bench="bwd_fastkron"), device_time=True,
                    device_method="kernels"))
    return out


def _ceilings(device: torch.device) -> dict:
    """Measured fp32 (TF32 off) GEMM throughput and device-to-device copy bandwidth."""
    n = 8192
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    mm = Tf32(False).wrap(lambda: a @ b)
    t_mm = time_ms(mm, device)
    return {"fp32_tflops": 2 * n**3 / t_mm / 1e9, "copy_tbps": copy_tbps(device, 1 << 28)}


def _plan(x, fs, backward: bool) -> str:
    return _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], backward).replace("\n", "; ")


def cases(device: torch.device, quick: bool) -> list[Case]:
    grid = QUICK if quick or device.type == "cpu" else FULL
    ceil = _ceilings(device) if device.type == "cuda" and not quick else None
    dtype = torch.float32
    mode = Tf32(False)
    fk = _fastkron() if device.type == "cuda" and not quick else None
    probe = _fastkron_probe(grid) if fk is not None else {}
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
        why = probe.get((batch, tuple(sizes)), "no FastKron")
        if fk is not None and why is None:
            out += _fastkron_cases(fk, x, fs, shape, mode, flops, nbytes, tol, extra)
        elif fk is not None:
            print(f"[fastkron] {shape}: no FastKron rows: {why}", file=sys.stderr, flush=True)
            for c in out[-2:]:  # this case's v2 rows say why FastKron has none
                c.extra["fastkron_skipped"] = why
    return out


def _geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summarize(rows: list[dict], out=None) -> dict:
    """Issue 5's targets from the rows of a full-grid run: per case the forward's speed-up over v2
    (eager and device time), its device time as a share of the roofline (target ≥ 60% where the
    batch is ≥ 1024), the backward's device time over the forward's (target ≤ 2.5), and FastKron's
    forward and backward times over ours where its rows exist; then the forward's geometric-mean
    speed-up (target ≥ 3x) and whether it is ever slower than v2."""
    out = sys.stdout if out is None else out  # read per call: pytest and others swap sys.stdout
    cases: dict = {}
    for r in rows:
        if r.get("family") != "kron" or "error" in r:
            continue
        kind = r["op"].split()[-1]  # fwd / bwd
        peer = "fastkron" if r.get("bench", "").endswith("fastkron") else "v2"
        cases.setdefault(r["shape"], {})[(kind, peer)] = r
    lines, eager, device, slower, skipped = [], [], [], [], []
    hdr = (f"{'case':18s} {'fwd us':>7s} {'x v2':>5s} {'x v2 dev':>8s} {'% roof':>6s} {'bwd/fwd':>7s}"
           f" {'FK fwd/ours':>11s} {'FK bwd/ours':>11s}")
    print(hdr, file=out)
    for shape, c in cases.items():
        f, b = c.get(("fwd", "v2")), c.get(("bwd", "v2"))
        if f is None:
            continue
        batch = int(shape.split("x")[0])
        dev = f.get("device_ms_ours", float("nan"))
        eager.append(1 / f["ratio"])
        if "device_ratio" in f:
            device.append(1 / f["device_ratio"])
        if f["ratio"] > 1 or f.get("device_ratio", 0) > 1:
            slower.append(shape)
        roof = 100 * f["roofline_ms"] / dev if "roofline_ms" in f else float("nan")
        bf = b["device_ms_ours"] / dev if b is not None and "device_ms_ours" in b else float("nan")
        fk = [c[(k, "fastkron")].get("device_ms_anchor", float("nan")) / c[(k, "fastkron")]["device_ms_ours"]
              if (k, "fastkron") in c and "device_ms_ours" in c[(k, "fastkron")] else float("nan")
              for k in ("fwd", "bwd")]
        flag = " (target 60)" if batch >= 1024 and roof < 60 else ""
        print(f"{shape:18s} {1e3 * dev:7.1f} {1 / f['ratio']:5.2f} {1 / f.get('device_ratio', float('nan')):8.2f}"
              f" {roof:6.1f} {bf:7.2f} {fk[0]:11.2f} {fk[1]:11.2f}{flag}", file=out)
        if "fastkron_skipped" in f:
            skipped.append(f"{shape}: {f['fastkron_skipped']}")
        lines.append(dict(shape=shape, fwd_device_ms=dev, speedup_eager=1 / f["ratio"],
                          speedup_device=1 / f.get("device_ratio", float("nan")), pct_roofline=roof,
                          bwd_over_fwd=bf, fastkron_fwd_over_ours=fk[0], fastkron_bwd_over_ours=fk[1]))
    summary = dict(cases=lines, geomean_eager=_geomean(eager), geomean_device=_geomean(device),
                   slower_than_v2=slower, fastkron_skipped=skipped)
    for line in skipped:
        print(f"no FastKron rows for {line}", file=out)
    print(f"forward vs v2, geometric mean: {summary['geomean_eager']:.2f}x eager, "
          f"{summary['geomean_device']:.2f}x device (target 3x); slower than v2: {slower or 'none'}", file=out)
    return summary


if __name__ == "__main__":  # python -m sparsekern.bench.kron bench.json
    from . import summary_main

    sys.exit(summary_main("sparsekern.bench.kron", "issue 5's targets (speed-up over v2, roofline, backward / "
                          "forward) from a kron bench", summarize))
