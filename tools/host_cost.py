"""Where the host time of one launch-bound sparsekern.matmul goes (CUDA, autograd off).

    python tools/host_cost.py        # on a GPU machine, after installing sparsekern

Prints µs per call of torch.matmul, sparsekern.matmul, and of each step of our path, so a change to
the Python layer can be judged against the issue's target (≤ 1.5x torch's host cost).
"""
from __future__ import annotations

import time

import torch

import sparsekern
from sparsekern import _C, dense
from sparsekern._core import _raw_stream, _to_dlpack, _workspaces


def per_call_us(fn, n=20000):
    for _ in range(500):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return best


def main():
    a = torch.randn(8, 64, device="cuda")
    b = torch.randn(64, 8, device="cuda")
    out = torch.empty(8, 8, device="cuda")
    sparsekern.matmul(a, b)
    dev = a.get_device()
    stream = _raw_stream(dev)
    ws = _workspaces[(dev, stream)]
    rows = {
        "torch.matmul": lambda: torch.matmul(a, b),
        "sparsekern.matmul": lambda: sparsekern.matmul(a, b),
        "  _check_args": lambda: dense._check_args(a, b, False),
        "  a.new_empty": lambda: a.new_empty((8, 8)),
        "  stream + workspace lookup": lambda: _workspaces.get((a.get_device(), _raw_stream(dev))),
        "  3 x to_dlpack": lambda: (_to_dlpack(a), _to_dlpack(b), _to_dlpack(out)),
        "  _C.gemm (capsules)": lambda: _C.gemm(_to_dlpack(a), _to_dlpack(b), _to_dlpack(out), 1.0, 0.0,
                                                False, False, False, False, ws[0], ws[1], stream),
        "  _gemm wrapper": lambda: dense._gemm(a, b, out, False),
    }
    for name, fn in rows.items():
        print(f"{name:32s} {per_call_us(fn):7.2f} us")


if __name__ == "__main__":
    main()
