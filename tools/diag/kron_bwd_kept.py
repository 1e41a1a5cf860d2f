"""One kron backward as training runs it (the forward keeps its states, the backward reads them),
for ncu (--kernel-name regex:...) or a device time.
Usage: python kron_bwd_kept.py BATCH P1,P2,... [--time]   (square fp32 factors, TF32 off)
--time: median kernel time of 50 graph-replayed forward+save and backward calls each."""
import math
import sys

import torch
from graphtime import graph_time  # this folder (python puts a script's folder on sys.path)

from sparsekern import kron as K

batch = int(sys.argv[1])
ps = [int(v) for v in sys.argv[2].split(",")]
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
x = torch.randn(batch, math.prod(ps), device=dev)
fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for p in ps]
g = torch.randn(batch, math.prod(ps), device=dev)
needs = [True] * (len(ps) + 1)
for _ in range(3):
    y, saved = K._forward(x, fs, save=True)
    K._backward(x, fs, g, needs, saved)
torch.cuda.synchronize()


if "--time" in sys.argv:
    tf = graph_time(lambda: K._forward(x, fs, save=True))
    tb = graph_time(lambda: K._backward(x, fs, g, needs, saved))
    print(f"{batch}x{ps}: forward(save) {tf:.1f} us, backward(kept) {tb:.1f} us, ratio {tb / tf:.2f}")
