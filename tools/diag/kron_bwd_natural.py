"""The backward's natural-order split (kron_plan.cpp: plan_natural_tail) against the native
plan it replaces (SPARSEKERN_KRON_BWD_KERNEL=old: the generic fused groups, which is what auto ran
for these shapes before) and the step-wise torch backward, device time of a 20-call CUDA graph
(every gradient), fp32, TF32 off, with the forward's time and the plans.

Usage: python tools/diag/kron_bwd_natural.py
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
for batch, sizes in [(256, [16, 16, 16, 16]), (128, [32, 32, 32]), (64, [8, 8, 8, 8, 8]), (1024, [16, 16, 16, 16]),
                     (512, [32, 32, 32])]:
    x, fs, gy = square_case(batch, sizes, g, dev)
    needs = [True] * (len(fs) + 1)
    fwd = 1e3 * graph_time_ms(lambda: kron_matmul(x, fs), dev)
    _C.kron_set_backward_kernel("")
    nat = 1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs), dev)
    plan = plan_line(x, fs)
    ref = K._backward(x, fs, gy, needs)
    _C.kron_set_backward_kernel("old")
    old = 1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs), dev)
    out = K._backward(x, fs, gy, needs)
    _C.kron_set_backward_kernel("")
    steps = 1e3 * graph_time_ms(lambda: K._backward_steps(x, fs, gy, needs), dev)
    diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(ref, out))
    print(f"{batch}x{sizes}: fwd {fwd:6.1f} | bwd natural {nat:7.1f} ({nat / fwd:.2f}x) generic {old:7.1f} "
          f"steps {steps:7.1f} | diff {diff:.1e}", flush=True)
    print("   plan:", plan, flush=True)
