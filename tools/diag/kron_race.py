"""A few small forwards of the register-tile kron kernel for compute-sanitizer (racecheck, memcheck):
each plan variant (8x8 with 256 threads and two or one X buffers, 8x8 with 128 threads, 4x4) on a
capped grid (several tiles per block: X buffers reused across tiles), a partial last tile,
padded q and rows of x that are not 16-byte aligned, checked against float64.

Usage: compute-sanitizer --tool racecheck python tools/diag/kron_race.py
"""
from __future__ import annotations

import math

import torch

from sparsekern import _C, kron_matmul
from sparsekern.kron import kron_reference

dev = torch.device("cuda")
torch.manual_seed(0)
CASES = [  # (rows, factor shapes, selection); grid=N: a few blocks with several tiles each
    (37, [(16, 16)] * 3, "new:threads=256,rows=4,stages=2,grid=3"),
    (37, [(16, 16)] * 3, "new:threads=256,rows=4,stages=1,grid=3"),
    (45, [(8, 8)] * 4, "new:threads=128,grid=4"),
    (19, [(64, 64)] * 2, "new:rows=2,grid=3"),
    (30, [(32, 32)] * 2, "new:tile=4,grid=3"),
    (11, [(3, 8), (5, 4), (7, 12)], "new:rows=2,grid=2"),
    (19, [(64, 64)] * 2, "new:threads=128,rows=2,grid=3"),
    (13, [(32, 32)] * 2, "new:tile=4,rows=2,grid=2,strided"),  # x rows not 16-byte aligned: 4-byte copies
]
bad = 0
for rows, shapes, sel in CASES:
    strided = sel.endswith(",strided")
    _C.kron_set_forward_kernel(sel.removesuffix(",strided"))
    P = math.prod(p for p, _ in shapes)
    x = torch.randn(rows, P + 3, device=dev)[:, 1:P + 1] if strided else torch.randn(rows, P, device=dev)
    fs = [torch.randn(p, q, device=dev) / math.sqrt(p) for p, q in shapes]
    y = kron_matmul(x, fs)
    ref = kron_reference(x.double(), [f.double() for f in fs])
    err = ((y.double() - ref).norm() / ref.norm()).item()
    bad += not err < 1e-5
    print(f"{'OK ' if err < 1e-5 else 'BAD'} {err:.1e} {rows}x{shapes} {sel}", flush=True)
_C.kron_set_forward_kernel("")
torch.cuda.synchronize()
print("kron_race:", "all OK" if bad == 0 else f"{bad} BAD")
