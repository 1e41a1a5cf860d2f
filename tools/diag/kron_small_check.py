"""The small-factor forward (kron_small.h) on a few shapes and plan overrides, each checked against
float64 (prints "ok" or "WRONG" per case): a short run for compute-sanitizer (memcheck, racecheck)."""
import math

import torch

from sparsekern import _C, kron_matmul
from sparsekern.kron import kron_reference

torch.manual_seed(0)
dev = torch.device("cuda")
cases = [(37, [8] * 4, "small"), (21, [16] * 3, "small:threads=128,grid=3"), (45, [32, 32], "small:grid=2"),
         (9, [8, 16, 32], "small:threads=256,grid=2"), (5, [32, 8, 4, 8], "small"),
         (13, [16, 16, 4], "small:grid=2"), (-11, [8, 8, 16], "small:grid=3"),  # -: rows 4 bytes off alignment
         (260, [16] * 3, "small:grid=100"), (-258, [16] * 3, "small:grid=64"), (-39, [8] * 4, "small:grid=5"),
         (1000, [16] * 3, "small:grid=792"), (999, [8] * 4, "small:grid=660")]
for batch, ps, sel in cases:
    _C.kron_set_forward_kernel(sel)
    n = math.prod(ps)
    x = torch.randn(batch, n, device=dev) if batch > 0 else torch.randn(-batch, n + 1, device=dev)[:, 1:]
    fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for p in ps]
    y = kron_matmul(x, fs)
    ref = kron_reference(x.double(), [f.double() for f in fs])
    err = ((y.double() - ref).norm() / ref.norm()).item()
    print(f"{abs(batch)}x{ps} {sel}: err {err:.1e}", "ok" if err < 1e-5 else "WRONG")
_C.kron_set_forward_kernel("")
