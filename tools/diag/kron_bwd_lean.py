"""The small-factor backward's lean buffer pool ("small:lean=1": one tile less per block, X read
again from global memory for mode 0's contraction; kron_small_bwd.h) against the default pool,
device time of a 20-call CUDA graph, every gradient, fp32, TF32 off; the largest relative
difference between the two; the plans. Includes natural-split tails (256 × 16^4, 64 × 8^5).

Usage: python tools/diag/kron_bwd_lean.py
"""
from __future__ import annotations

import torch

from sparsekern import _C, kron_matmul
from sparsekern import kron as K
from sparsekern.bench import graph_time_ms

from kron_profile import plan_line, square_case  # this folder

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator().manual_seed(0)
for batch, sizes in [(1024, [8, 8, 8, 8]), (1024, [16, 16, 16]), (1024, [4, 4, 4, 4, 4]), (1024, [16, 8, 8]),
                     (4096, [8, 8, 8, 8]), (256, [16, 16, 32]), (256, [16, 16, 16, 16]), (64, [8, 8, 8, 8, 8])]:
    x, fs, gy = square_case(batch, sizes, g, dev)
    needs = [True] * (len(fs) + 1)
    fwd = 1e3 * graph_time_ms(lambda: kron_matmul(x, fs), dev)
    row = {}
    outs = {}
    for sel in ["small", "small:lean=1"]:
        _C.kron_set_backward_kernel(sel)
        row[sel] = 1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs), dev)
        outs[sel] = K._backward(x, fs, gy, needs)
        row[sel + " plan"] = plan_line(x, fs)
    _C.kron_set_backward_kernel("")
    diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(outs["small"], outs["small:lean=1"]))
    print(f"{batch}x{sizes}: fwd {fwd:6.1f} | small {row['small']:7.1f} ({row['small'] / fwd:.2f}x) "
          f"lean {row['small:lean=1']:7.1f} ({row['small:lean=1'] / fwd:.2f}x) | diff {diff:.1e}", flush=True)
    print("   lean plan:", row["small:lean=1 plan"], flush=True)
