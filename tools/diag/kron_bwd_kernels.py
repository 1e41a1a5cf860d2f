"""Kernel times of one kron training backward (the forward keeps its states), per kernel name,
from torch.profiler over 20 calls. Usage: python kron_bwd_kernels.py "BATCH P1,P2,..." ..."""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from kron_case import kron_case  # this folder
from sparsekern import kron as K

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
for case in sys.argv[1:]:
    c = kron_case(case, dev)
    batch, ps, x, fs, g, needs, saved = c.batch, c.ps, c.x, c.fs, c.g, c.needs, c.saved
    for _ in range(3):
        K._backward(x, fs, g, needs, saved)
    torch.cuda.synchronize()
    n = 20
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            K._backward(x, fs, g, needs, saved)
        torch.cuda.synchronize()
    per = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name] = per.get(e.name, 0.0) + e.device_time / n
    parts = "; ".join(f"{k[:60]} {v:.1f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]))
    print(f"{batch}x{ps}: kernels per backward (us): {parts}", flush=True)
