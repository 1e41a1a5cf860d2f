"""Graph-replayed device time of a kron forward and training backward next to the sum of their
kernels' durations (torch.profiler), and the plans: how much of a call is launch gaps.
Usage: python kron_gaps.py "BATCH P1,P2,..." ...   (square fp32 factors, TF32 off)"""
import sys

import torch
from graphtime import graph_time, kernel_times  # this folder
from kron_case import kron_case

from sparsekern import _C
from sparsekern import kron as K
from sparsekern._core import as_dlpack

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")


for case in sys.argv[1:]:
    c = kron_case(case, dev)
    batch, ps, x, fs, g, needs, saved = c.batch, c.ps, c.x, c.fs, c.g, c.needs, c.saved
    for name, fn, bwd in [("forward", lambda: K._forward(x, fs), False),
                          ("backward", lambda: K._backward(x, fs, g, needs, saved), True)]:
        per = kernel_times(fn, reps=20, width=200)
        total = graph_time(fn)
        plan = _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], bwd).replace("\n", "; ")
        parts = "; ".join(f"{k[:50]} {v:.1f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]))
        print(f"{batch}x{ps} {name}: graph {total:.1f} us, kernels {sum(per.values()):.1f} us "
              f"(gap {total - sum(per.values()):.1f}): {parts}\n   plan: {plan}", flush=True)
