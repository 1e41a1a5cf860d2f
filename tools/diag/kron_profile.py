"""Where the time of each kron benchmark case goes (for tools/diag/kron2.sh on the GPU machine).

Per case of the issue-5 table, forward and backward (all gradients), ours and v2: the GPU time of
every kernel (torch.profiler, summed per kernel name per call), the host time per call (back-to-
back calls, no sync: what a launch-bound shape costs), the event-timed median the benchmark
reports, and the plan. A case is host-bound when its host time per call exceeds its kernels' sum.
"""
from __future__ import annotations

import json
import math
import sys

import torch

from sparsekern import _C
from sparsekern._core import as_dlpack
from sparsekern.bench import gpu_events, host_time_us, time_ms
from sparsekern.bench.kron import FULL
from sparsekern.kron import kron_matmul, kron_reference


def square_case(batch, sizes, gen, dev):
    """x (batch × Π p), square factors scaled by 1/√p (values stay O(1)), and a ∂ℓ/∂y, on `dev`."""
    P = math.prod(sizes)
    x = torch.randn(batch, P, generator=gen).to(dev)
    fs = [(torch.randn(p, p, generator=gen) / math.sqrt(p)).to(dev) for p in sizes]
    gy = torch.randn(batch, P, generator=gen).to(dev)
    return x, fs, gy


def square_case_with_grads(case, gen, dev):
    """A case "BATCH P1,P2,..." as square_case makes it, with every gradient wanted and their float64
    reference: (batch, sizes, x, fs, gy, needs, want)."""
    b, ps = case.split()
    batch, sizes = int(b), [int(v) for v in ps.split(",")]
    x, fs, gy = square_case(batch, sizes, gen, dev)
    needs = [True] * (len(sizes) + 1)
    x6, f6 = x.double().requires_grad_(), [f.double().requires_grad_() for f in fs]
    want = torch.autograd.grad(kron_reference(x6, f6), [x6, *f6], gy.double())
    return batch, sizes, x, fs, gy, needs, want


def plan_line(x, fs, backward=True):
    """The first line of the product's plan (its first kernel)."""
    return _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], backward).splitlines()[0]


def kernels(fn, reps=20):
    """{kernel name: µs per call} from the profiler (CUDA activity), and launches per call."""
    out = {}
    events = gpu_events(fn, torch.device("cuda"), reps)
    for e in events:
        name = e.name[:90]
        out[name] = out.get(name, 0.0) + e.time_range.elapsed_us() / reps
    return out, len(events) / reps


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    rows = []
    g = torch.Generator().manual_seed(0)
    for batch, sizes in FULL:
        P = math.prod(sizes)
        x = torch.randn(batch, P, generator=g).to(dev)
        fs = [(torch.randn(s, s, generator=g) / math.sqrt(s)).to(dev) for s in sizes]
        xg = x.clone().requires_grad_()
        fg = [f.clone().requires_grad_() for f in fs]
        gy = torch.randn(batch, P, generator=g).to(dev)
        y_ours = kron_matmul(xg, fg)
        y_ref = kron_reference(xg, fg)
        fns = {
            "fwd ours": lambda: kron_matmul(x, fs),
            "fwd v2": lambda: kron_reference(x, fs),
            "bwd ours": lambda: torch.autograd.grad(y_ours, [xg, *fg], gy, retain_graph=True),
            "bwd v2": lambda: torch.autograd.grad(y_ref, [xg, *fg], gy, retain_graph=True),
        }
        shape = f"{batch}x{sizes}"
        for plan_bwd in (False, True):
            plan = _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], plan_bwd)
            print(f"## {shape} plan ({'bwd' if plan_bwd else 'fwd'}): {plan.replace(chr(10), '; ')}")
        for name, fn in fns.items():
            ks, launches = kernels(fn)
            gpu = sum(ks.values())
            host = host_time_us(fn, dev, calls=20)
            med = time_ms(fn, dev) * 1e3
            bound = "HOST-bound" if host > gpu else "gpu-bound"
            print(f"{shape:22s} {name:9s} event median {med:8.1f} us | kernels {gpu:8.1f} us in "
                  f"{launches:4.1f} launches | host {host:7.1f} us/call -> {bound}")
            for k, v in sorted(ks.items(), key=lambda kv: -kv[1])[:6]:
                print(f"      {v:8.1f} us  {k}")
            rows.append(dict(shape=shape, what=name, median_us=med, kernels_us=gpu, launches=launches,
                             host_us=host, kernels=ks))
        sys.stdout.flush()
    return rows


if __name__ == "__main__":
    rows = main()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump(rows, fh, indent=1)
