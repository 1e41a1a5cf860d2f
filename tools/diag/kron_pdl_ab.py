"""Device time of the plain kron forward and the kept-state backward (graph-replayed, K._backward
with the training forward's saved states) with the kernels launched plainly (SPARSEKERN_KRON_PDL=0)
and as programmatic dependent launches (=1: since session 38 the fp32 fused kernels too, before
only the backward's ∂ℓ/∂F reduction), alternated in one process, ROUNDS rounds, and the backward /
forward ratio of each. Usage: python kron_pdl_ab.py ROUNDS "BATCH P1,P2,..." ...
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
    fw = {"0": [], "1": []}
    bw = {"0": [], "1": []}
    for _ in range(rounds):
        for v in ["0", "1"]:
            os.environ["SPARSEKERN_KRON_PDL"] = v
            fw[v].append(graph_time(lambda: K._forward(x, fs)))
            bw[v].append(graph_time(lambda: K._backward(x, fs, g, needs, saved)))
    os.environ.pop("SPARSEKERN_KRON_PDL")

    def us(t):
        return " ".join(f"{u:.1f}" for u in t)

    print(f"{batch}x{ps}: forward plain {us(fw['0'])} | PDL {us(fw['1'])} || backward plain {us(bw['0'])}"
          f" | PDL {us(bw['1'])} || ratio {min(bw['0']) / min(fw['0']):.2f} -> {min(bw['1']) / min(fw['1']):.2f}",
          flush=True)
