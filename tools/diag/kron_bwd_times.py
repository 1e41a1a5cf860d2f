"""Device time of the default kron backward (every gradient, states recomputed: K._backward) and
of the forward, per case, graph-replayed (tools/diag/graphtime.py), with the backward's largest
relative error against float64. For A/B runs across wheels (tools/diag/lib.sh: diag_ab_wheels).
Usage: python kron_bwd_times.py "BATCH P1,P2,..." ...   (square fp32 factors, TF32 off)"""
import sys

import torch
from graphtime import graph_time  # this folder
from kron_profile import square_case

from sparsekern import kron as K

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
g = torch.Generator().manual_seed(0)
for case in sys.argv[1:]:
    b, ps = case.split()
    batch, ps = int(b), [int(v) for v in ps.split(",")]
    x, fs, gy = square_case(batch, ps, g, dev)
    needs = [True] * (len(ps) + 1)
    fwd = graph_time(lambda: K.kron_matmul(x, fs))  # µs per call
    bwd = graph_time(lambda: K._backward(x, fs, gy, needs))
    got = K._backward(x, fs, gy, needs)
    x6, f6 = x.double().requires_grad_(), [f.double().requires_grad_() for f in fs]
    want = torch.autograd.grad(K.kron_reference(x6, f6), [x6, *f6], gy.double())
    err = max(((a.double() - w).norm() / w.norm()).item() for a, w in zip(got, want))
    print(f"{batch}x{ps}: fwd {fwd:7.1f} us  bwd {bwd:7.1f} us ({bwd / fwd:.2f}x)  err {err:.1e}", flush=True)
