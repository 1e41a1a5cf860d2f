"""Session 24: the natural split's backward with the tail's T0 kept and the staged head-gradient
pass. Per case ("BATCH P1,P2,..."), device µs of graph-replayed calls (graphtime.graph_time): the
forward without and with its states kept, the backward from kept states and recomputing them,
the backward / forward ratio the bench reports (kept-state backward over the plain forward), and
the kept-state backward's kernels (torch profiler)."""
import sys

import torch

from graphtime import graph_time, kernel_times
from kron_case import kron_case
from sparsekern import kron as K

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
for case in sys.argv[1:]:
    c = kron_case(case, dev)
    batch, ps, x, fs, g, needs, saved = c.batch, c.ps, c.x, c.fs, c.g, c.needs, c.saved
    fwd = graph_time(lambda: K._forward(x, fs), n=20)
    fwd_keep = graph_time(lambda: K._forward(x, fs, save=True), n=20)
    bwd = graph_time(lambda: K._backward(x, fs, g, needs, saved), n=20)
    bwd_re = graph_time(lambda: K._backward(x, fs, g, needs, None), n=20)
    saved_mb = (saved[1] / 2**20) if saved is not None else 0.0
    print(f"{batch} x {ps}: fwd {fwd:.1f} | fwd keeping states {fwd_keep:.1f} ({saved_mb:.0f} MB kept) | "
          f"bwd kept {bwd:.1f} | bwd recomputing {bwd_re:.1f} | bwd kept / fwd {bwd / fwd:.2f}", flush=True)
    kt = kernel_times(lambda: K._backward(x, fs, g, needs, saved), reps=10, width=140)
    print("   kernels: " + ", ".join(f"{k.strip()} {v:.1f}" for k, v in sorted(kt.items(), key=lambda kv: -kv[1])),
          flush=True)
