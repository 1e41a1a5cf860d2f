"""A few small-factor backwards (kron_small_bwd.h) for compute-sanitizer (memcheck, racecheck): capped
grids (several tiles per block: the buffer rotation and the next tile's copies), partial last
tiles, both block sizes, every factor width (4 … 32), rows of x and ∂ℓ/∂y not 16-byte aligned, and
some gradients not wanted; each gradient against float64.

Usage: compute-sanitizer --tool racecheck python tools/diag/kron_small_bwd_check.py
"""
from __future__ import annotations

import math

import torch

from sparsekern import _C
from sparsekern import kron as K

dev = torch.device("cuda")
torch.manual_seed(0)
CASES = [  # (rows, sizes, selection, strided, needs)
    (13, [8, 8, 8, 8], "small:grid=3", False, None), (9, [16, 16, 16], "small:grid=2", False, None),
    (11, [16, 8, 8], "small:grid=2", True, None), (7, [4, 4, 4, 4, 4], "small:grid=1", False, None),
    (10, [8, 16, 8], "small:grid=3", False, [False, True, False, True]),
    (9, [32, 32], "small:grid=2", False, None), (5, [8, 16, 32], "small:threads=256,grid=2", False, None),
    (260, [16, 16, 16], "small:grid=100", False, None), (258, [16, 16, 16], "small:grid=64", True, None),
    (37, [8, 8, 8, 8], "small:grid=5", True, None),
]
failed = 0
for rows, sizes, sel, strided, needs in CASES:
    N = math.prod(sizes)
    if strided:
        x = torch.randn(rows, N + 3, device=dev)[:, 1:N + 1]
        gy = torch.randn(rows, N + 5, device=dev)[:, 3:N + 3]
    else:
        x = torch.randn(rows, N, device=dev)
        gy = torch.randn(rows, N, device=dev)
    fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for p in sizes]
    needs = needs or [True] * (len(sizes) + 1)
    _C.kron_set_backward_kernel(sel)
    try:
        got = K._backward(x, fs, gy, needs)
    finally:
        _C.kron_set_backward_kernel("")
    x6, f6 = x.double().requires_grad_(), [f.double().requires_grad_() for f in fs]
    want = torch.autograd.grad(K.kron_reference(x6, f6), [x6, *f6], gy.double())
    ok = True
    for k, (a, b) in enumerate(zip(got, want)):
        good = a is None if not needs[k] else (
            a is not None and ((a.double() - b).norm() / b.norm()).item() < 1e-5)
        if not good:
            ok = False
            print("MISMATCH", rows, sizes, sel, "gradient", k, flush=True)
    failed += not ok
torch.cuda.synchronize()
print(f"cases ok: {len(CASES) - failed} of {len(CASES)}")
