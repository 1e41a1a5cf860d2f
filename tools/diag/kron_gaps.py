"""Graph-replayed device time of a kron forward and training backward next to the sum of their
kernels' durations (torch.profiler), and the plans: how much of a call is launch gaps.
Usage: python kron_gaps.py "BATCH P1,P2,..." ...   (square fp32 factors, TF32 off)"""
import sys

import torch
from graphtime import graph_time  # this folder
from torch.profiler import ProfilerActivity, profile

from sparsekern import _C
from kron_case import kron_case  # this folder
from sparsekern import kron as K
from sparsekern._core import as_dlpack

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")


def kernels(fn, n=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    per = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name] = per.get(e.name, 0.0) + e.device_time / n
    return per


for case in sys.argv[1:]:
    c = kron_case(case, dev)
    batch, ps, x, fs, g, needs, saved = c.batch, c.ps, c.x, c.fs, c.g, c.needs, c.saved
    for name, fn, bwd in [("forward", lambda: K._forward(x, fs), False),
                          ("backward", lambda: K._backward(x, fs, g, needs, saved), True)]:
        per = kernels(fn)
        total = graph_time(fn)
        plan = _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], bwd).replace("\n", "; ")
        parts = "; ".join(f"{k[:50]} {v:.1f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]))
        print(f"{batch}x{ps} {name}: graph {total:.1f} us, kernels {sum(per.values()):.1f} us "
              f"(gap {total - sum(per.values()):.1f}): {parts}\n   plan: {plan}", flush=True)
