"""Device time of the kept-state kron backward (graph-replayed, K._backward with the training
forward's saved states) with its ∂ℓ/∂F reduction launched plainly (SPARSEKERN_KRON_PDL=0) and as a
programmatic dependent launch (=1), alternated in one process, ROUNDS rounds, with the plain
forward's time for the ratio. Usage: python kron_pdl_ab.py ROUNDS "BATCH P1,P2,..." ...
(square fp32 factors, TF32 off)"""
import math
import os
import sys

import torch
from graphtime import graph_time  # this folder

from sparsekern import kron as K

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
rounds = int(sys.argv[1])
for case in sys.argv[2:]:
    b, ps = case.split()
    batch, ps = int(b), [int(v) for v in ps.split(",")]
    x = torch.randn(batch, math.prod(ps), device=dev)
    fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for p in ps]
    g = torch.randn(batch, math.prod(ps), device=dev)
    needs = [True] * (len(ps) + 1)
    _, saved = K._forward(x, fs, save=True)
    fwd = graph_time(lambda: K._forward(x, fs))
    us = {"0": [], "1": []}
    for _ in range(rounds):
        for v in ["0", "1"]:
            os.environ["SPARSEKERN_KRON_PDL"] = v
            us[v].append(graph_time(lambda: K._backward(x, fs, g, needs, saved)))
    os.environ.pop("SPARSEKERN_KRON_PDL")
    print(f"{batch}x{ps}: forward {fwd:.1f} us | backward plain " + " ".join(f"{u:.1f}" for u in us["0"])
          + " | PDL " + " ".join(f"{u:.1f}" for u in us["1"])
          + f" | ratio {min(us['0']) / fwd:.2f} -> {min(us['1']) / fwd:.2f}", flush=True)
