"""A few small-factor backwards with "small:e=16" for compute-sanitizer (memcheck, racecheck): a
capped grid (several tiles per block: the buffer rotation and the next tile's copies), partial
last tiles, rows of x and ∂ℓ/∂y not 16-byte aligned, some gradients not wanted; each against the
default selection's gradients and float64.

Usage: compute-sanitizer --tool racecheck python tools/diag/kron_bwd_e16_check.py
"""
from __future__ import annotations

import math

import torch

from sparsekern import _C
from sparsekern import kron as K

dev = torch.device("cuda")
torch.manual_seed(0)
CASES = [  # (rows, sizes, grid, strided, needs)
    (13, [8, 8, 8, 8], 3, False, None), (9, [16, 16, 16], 2, False, None),
    (11, [16, 8, 8], 2, True, None), (7, [4, 4, 4, 4, 4], 1, False, None),
    (10, [8, 16, 8], 3, False, [False, True, False, True]),
]
bad = failed = 0
for rows, sizes, grid, strided, needs in CASES:
    N = math.prod(sizes)
    if strided:
        x = torch.randn(rows, N + 3, device=dev)[:, 1:N + 1]
        gy = torch.randn(rows, N + 5, device=dev)[:, 3:N + 3]
    else:
        x = torch.randn(rows, N, device=dev)
        gy = torch.randn(rows, N, device=dev)
    fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for p in sizes]
    needs = needs or [True] * (len(sizes) + 1)
    _C.kron_set_backward_kernel(f"small:grid={grid},e=16")
    try:
        got = K._backward(x, fs, gy, needs)
    finally:
        _C.kron_set_backward_kernel("")
    x6, f6 = x.double().requires_grad_(), [f.double().requires_grad_() for f in fs]
    want = torch.autograd.grad(K.kron_reference(x6, f6), [x6, *f6], gy.double())
    before = bad
    for k, (a, b) in enumerate(zip(got, want)):
        if not needs[k]:
            ok = a is None
        else:
            ok = a is not None and ((a.double() - b).norm() / b.norm()).item() < 1e-5
        if not ok:
            bad += 1
            print("MISMATCH", rows, sizes, k, flush=True)
    failed += bad > before
torch.cuda.synchronize()
print(f"cases ok: {len(CASES) - failed} of {len(CASES)}, mismatches {bad}")
