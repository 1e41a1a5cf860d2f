"""The natural-order split (kron_plan.cpp: plan_natural_tail) against the plan it replaces, in one run:
the same product with X's rows dense (split) and with X's rows 4 floats apart more (no split: the
generic groups), device time of a 20-call CUDA graph, fp32, TF32 off, plus the kernels of the split.

Usage: python tools/diag/kron_natural.py
"""
from __future__ import annotations

import math

import torch

from sparsekern import kron_matmul
from sparsekern.bench import graph_time_ms

from kron_profile import kernels, plan_line, square_case  # this folder

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator().manual_seed(0)
for batch, sizes in [(256, [16, 16, 16, 16]), (128, [32, 32, 32]), (1024, [16, 16, 16, 16]), (64, [8, 8, 8, 8, 8]),
                     (512, [32, 32, 32]), (16, [16, 16, 16, 16])]:
    x, fs, _ = square_case(batch, sizes, g, dev)
    N = x.shape[1]
    xp = torch.empty(batch, N + 4, device=dev)[:, :N]
    xp.copy_(x)
    split = 1e3 * graph_time_ms(lambda: kron_matmul(x, fs), dev)
    generic = 1e3 * graph_time_ms(lambda: kron_matmul(xp, fs), dev)
    diff = ((kron_matmul(x, fs) - kron_matmul(xp, fs)).norm() / kron_matmul(xp, fs).norm()).item()
    ks, _ = kernels(lambda: kron_matmul(x, fs))
    print(f"{batch}x{sizes}: split {split:7.1f} us, generic {generic:7.1f} us ({generic / split:.2f}x) diff {diff:.1e}",
          flush=True)
    print("   split plan:", plan_line(x, fs, backward=False), "| generic plan:", plan_line(xp, fs, backward=False))
    print("   kernels:", "; ".join(f"{n[:40]} {us:.1f}" for n, us in sorted(ks.items(), key=lambda kv: -kv[1])[:3]))
