"""Issue 5: the step-wise kron backward (``SPARSEKERN_KRON_BWD=steps``) against the fused one.

For the ten cases of the issue's table, on the device given: the forward (``kron_matmul``, no
autograd), the fused backward (``_backward``: ``_C.kron_matmul_backward``) and the steps backward
(``_backward_steps``, with each ∂ℓ/∂F GEMM as cuBLAS chooses and split into B slices for every B
of ``--split``), all gradients; then the same two backwards through ``torch.autograd.grad`` (what a
user pays: autograd + Python on top). Prints bwd/fwd for each (target ≤ 2.5), verifies every
variant against a float64 reference first, and prints the on-paper cost of the steps backward
(GEMM FLOPs and bytes per kernel, a roofline model) next to the forward's.

    python tools/diag/kron_bwd_steps.py cuda [--json PATH] [--split 8,32,128] [--profile] [--tf32]
    python tools/diag/kron_bwd_steps.py cpu --scale 64      # checks that it works; not the target
    python tools/diag/kron_bwd_steps.py --paper             # the cost table only, no device needed

fp32, TF32 off unless ``--tf32`` (as ``sparsekern bench``). CUDA times: median of CUDA events
(``sparsekern.bench.time_ms``); CPU: wall-clock medians. ``--profile`` (CUDA) lists the kernels of
the steps backward per case (torch.profiler), to see which GEMM (and which cuBLAS kernel: split-K
or not) takes the time.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys

import torch

from sparsekern.bench import time_ms
from sparsekern.bench.kron import FULL
from sparsekern.kron import _backward, _backward_steps, kron_matmul, kron_reference
from sparsekern.kron_cli import min_bytes, shuffle_flops
from sparsekern.testing import rel_error

# H200 ceilings measured by `sparsekern bench --full --family kron` (2026-11-22 run 2): fp32 SGEMM
# with TF32 off and device-to-device copy bandwidth. The model's per-kernel floor is a launch
# plus ramp-up of a small cuBLAS kernel back to back (a few µs on Hopper).
PEAK_TFLOPS, COPY_TBPS, KERNEL_FLOOR_US = 51.2, 4.09, 3.0
# Host estimate of one steps call (a guess to be replaced by the measurement): ~5 µs of Python and
# dispatch per torch.mm / copy on CUDA, ~10 µs of argument checks, environment reads and views.
HOST_US_PER_KERNEL, HOST_FIXED_US = 5.0, 10.0
RUN2 = pathlib.Path(__file__).resolve().parents[2] / "benchmarks/results/kron-H200-2026-11-22-run2.json"


def steps_kernels(batch: int, shapes, es: int) -> list[tuple[str, float, float]]:
    """(kernel, FLOPs, bytes) of the steps backward with every gradient wanted, in launch order
    (see ``_backward_steps``: rowsₖ = M·Πⱼ<ₖ pⱼ·Πⱼ>ₖ qⱼ; each GEMM reads both operands and writes
    its result once)."""
    n = len(shapes)
    ps, qs = [p for p, _ in shapes], [q for _, q in shapes]
    rows = [batch * math.prod(ps[:k]) * math.prod(qs[k + 1:]) for k in range(n)]
    out = []
    for k in range(n - 1, 0, -1):  # recompute S_{n-2} … S_0
        p, q, r = ps[k], qs[k], rows[k]
        out.append((f"recompute F{k}", 2.0 * r * p * q, es * (r * p + p * q + r * q)))
    if n > 1:
        Q = math.prod(qs)
        out.append(("transpose dy", 0.0, 2.0 * es * batch * Q))
    for k in range(n):
        p, q, r = ps[k], qs[k], rows[k]
        out.append((f"dF{k}", 2.0 * r * p * q, es * (r * p + r * q + p * q)))
        out.append((f"dS{k}" if k < n - 1 else "dx", 2.0 * r * p * q, es * (r * q + p * q + r * p)))
    return out


def model_us(kernels) -> float:
    return sum(max(f / (PEAK_TFLOPS * 1e6), b / (COPY_TBPS * 1e6), KERNEL_FLOOR_US) for _, f, b in kernels)


def h200_run2() -> dict:
    """{(op, shape): µs} of the fused forward/backward on the H200 (run 2), when the file is there."""
    try:
        rows = json.loads(RUN2.read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return {}
    return {(r["op"].split()[-1], r["shape"]): r["ours"] * 1e3 for r in rows
            if r.get("family") == "kron" and "ours" in r}


def paper() -> list[dict]:
    run2 = h200_run2()
    print(f"On paper (fp32; H200 {PEAK_TFLOPS} TFLOP/s, {COPY_TBPS} TB/s, floor {KERNEL_FLOOR_US} µs/kernel):")
    print(f"{'case':20s} {'fwd GFLOP':>9s} {'fwd MB':>7s} {'roof us':>7s} {'fwd us':>7s} | "
          f"{'bwd GFLOP':>9s} {'bwd MB':>7s} {'kern':>4s} {'model us':>8s} {'F x':>5s} {'B x':>5s} "
          f"{'host est':>8s} {'model/fwd':>9s} {'fused b/f':>9s}")
    rows = []
    for batch, sizes in FULL:
        shapes = [(s, s) for s in sizes]
        shape = f"{batch}x[{' '.join(map(str, sizes))}]"
        ff, fb = shuffle_flops(batch, shapes), min_bytes(batch, shapes, torch.float32)
        roof = max(ff / (PEAK_TFLOPS * 1e6), fb / (COPY_TBPS * 1e6))
        ks = steps_kernels(batch, shapes, 4)
        bf, bb = sum(f for _, f, _ in ks), sum(b for _, _, b in ks)
        gpu = model_us(ks)
        host = HOST_FIXED_US + HOST_US_PER_KERNEL * len(ks)
        model = max(gpu, host)
        fwd = run2.get(("fwd", shape), float("nan"))
        fused = run2.get(("bwd", shape), float("nan"))
        print(f"{shape:20s} {ff / 1e9:9.3f} {fb / 1e6:7.1f} {roof:7.1f} {fwd:7.1f} | {bf / 1e9:9.3f} "
              f"{bb / 1e6:7.1f} {len(ks):4d} {gpu:8.1f} {bf / ff:5.2f} {bb / fb:5.1f} {host:8.1f} {model / fwd:9.2f} "
              f"{fused / fwd:9.2f}")
        rows.append(dict(shape=shape, fwd_flops=ff, fwd_min_bytes=fb, fwd_roof_us=roof, fwd_h200_us=fwd,
                         steps_flops=bf, steps_bytes=bb, steps_kernels=len(ks), steps_gpu_model_us=gpu,
                         steps_host_est_us=host, steps_model_us=model,
                         fused_bwd_h200_us=fused))
    print("F x / B x: the steps backward's FLOPs / bytes over the forward's (useful FLOPs, minimal bytes); "
          "model/fwd: max(model, host est) over the H200 forward measured in run 2 (target <= 2.5).")
    return rows


def kernel_profile(fn, reps: int = 10) -> dict:
    """{kernel name: µs per call} (kron_profile.kernels, in this folder)."""
    from kron_profile import kernels
    return kernels(fn, reps)[0]


def measure(device: torch.device, scale: int, splits: list[int], profile_kernels: bool) -> list[dict]:
    dtype = torch.float32
    g = torch.Generator().manual_seed(0)
    results = []
    print(f"\nMeasured on {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'} "
          f"(batch / {scale}), µs; b/f = backward / forward:")
    hdr = f"{'case':20s} {'fwd':>8s} | {'fused':>8s} {'b/f':>5s} | {'steps':>8s} {'b/f':>5s}"
    hdr += "".join(f" | {'split' + str(b):>9s} {'b/f':>5s}" for b in splits)
    hdr += f" | {'ag fused':>8s} {'b/f':>5s} | {'ag steps':>8s} {'b/f':>5s} | err fused / steps"
    print(hdr)
    for batch, sizes in FULL:
        batch = max(batch // scale, 1)
        shapes = [(s, s) for s in sizes]
        shape = f"{batch}x[{' '.join(map(str, sizes))}]"
        P = math.prod(sizes)
        x = torch.randn(batch, P, generator=g, dtype=torch.float64).to(dtype=dtype, device=device)
        fs = [(torch.randn(p, q, generator=g, dtype=torch.float64) / math.sqrt(p)).to(dtype=dtype, device=device)
              for p, q in shapes]
        gy = torch.randn(batch, P, generator=g, dtype=torch.float64).to(dtype=dtype, device=device)
        needs = [True] * (len(fs) + 1)

        # Verify before timing: both backwards against float64 autograd of the reference.
        x64 = x.double().requires_grad_()
        f64 = [f.double().requires_grad_() for f in fs]
        want = torch.autograd.grad(kron_reference(x64, f64), [x64, *f64], gy.double())
        os.environ.pop("SPARSEKERN_KRON_BWD_SPLIT", None)
        err_fused = max(rel_error(a, b) for a, b in zip(_backward(x, fs, gy, needs), want))
        err_steps = max(rel_error(a, b) for a, b in zip(_backward_steps(x, fs, gy, needs), want))
        for b in splits:
            os.environ["SPARSEKERN_KRON_BWD_SPLIT"] = str(b)
            err_steps = max(err_steps, *(rel_error(a, w) for a, w in zip(_backward_steps(x, fs, gy, needs), want)))
        os.environ.pop("SPARSEKERN_KRON_BWD_SPLIT", None)

        row = dict(shape=shape, err_fused=err_fused, err_steps=err_steps)
        row["fwd"] = time_ms(lambda: kron_matmul(x, fs), device) * 1e3
        row["fused"] = time_ms(lambda: _backward(x, fs, gy, needs), device) * 1e3
        row["steps"] = time_ms(lambda: _backward_steps(x, fs, gy, needs), device) * 1e3
        for b in splits:
            os.environ["SPARSEKERN_KRON_BWD_SPLIT"] = str(b)
            row[f"split{b}"] = time_ms(lambda: _backward_steps(x, fs, gy, needs), device) * 1e3
        os.environ.pop("SPARSEKERN_KRON_BWD_SPLIT", None)

        xg = x.clone().requires_grad_()
        fg = [f.clone().requires_grad_() for f in fs]
        y = kron_matmul(xg, fg)
        for name, mode in (("ag fused", None), ("ag steps", "steps")):
            if mode is None:
                os.environ.pop("SPARSEKERN_KRON_BWD", None)
            else:
                os.environ["SPARSEKERN_KRON_BWD"] = mode
            row[name] = time_ms(lambda: torch.autograd.grad(y, [xg, *fg], gy, retain_graph=True), device) * 1e3
        os.environ.pop("SPARSEKERN_KRON_BWD", None)

        f = row["fwd"]
        line = f"{shape:20s} {f:8.1f} | {row['fused']:8.1f} {row['fused'] / f:5.2f} | {row['steps']:8.1f} " \
               f"{row['steps'] / f:5.2f}"
        line += "".join(f" | {row[f'split{b}']:9.1f} {row[f'split{b}'] / f:5.2f}" for b in splits)
        line += f" | {row['ag fused']:8.1f} {row['ag fused'] / f:5.2f} | {row['ag steps']:8.1f} " \
                f"{row['ag steps'] / f:5.2f} | {err_fused:.1e} / {err_steps:.1e}"
        print(line)
        if profile_kernels and device.type == "cuda":
            ks = kernel_profile(lambda: _backward_steps(x, fs, gy, needs))
            row["steps_kernels_us"] = ks
            for k, v in sorted(ks.items(), key=lambda kv: -kv[1])[:8]:
                print(f"      {v:8.1f} us  {k}")
        sys.stdout.flush()
        results.append(row)
    return results


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("device", nargs="?", default=None, help="cpu or cuda (omit with --paper)")
    ap.add_argument("--scale", type=int, default=None, help="divide every batch by this (default: 1 on CUDA, 64 on the CPU)")
    ap.add_argument("--split", default="", help="comma-separated B values for SPARSEKERN_KRON_BWD_SPLIT")
    ap.add_argument("--paper", action="store_true", help="print the on-paper cost table")
    ap.add_argument("--profile", action="store_true", help="kernels of the steps backward (CUDA)")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 (default off, as the benchmark)")
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args(argv)
    out: dict = {}
    if args.paper or args.device is None:
        out["paper"] = paper()
    if args.device is not None:
        device = torch.device(args.device)
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        scale = args.scale or (1 if device.type == "cuda" else 64)
        splits = [int(b) for b in args.split.split(",") if b.strip()]
        out["measured"] = measure(device, scale, splits, args.profile)
        out["tf32"] = args.tf32
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
