"""Device time of kron forwards, several cases in one process (graph-replayed, median of 5 x 50).
Usage: python kron_fwd_times.py "BATCH P1,P2,..." ... [--save]   (square fp32 factors, TF32 off)
--save: the training forward (keeps its state for the backward) and its backward, too."""
import math
import sys

import torch
from graphtime import graph_time  # this folder (python puts a script's folder on sys.path)

from sparsekern import kron as K

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
save = "--save" in sys.argv


for case in [a for a in sys.argv[1:] if not a.startswith("--")]:
    b, ps = case.split()
    batch, ps = int(b), [int(v) for v in ps.split(",")]
    x = torch.randn(batch, math.prod(ps), device=dev)
    fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for p in ps]
    y = K._forward(x, fs)
    ref = K.kron_reference(x.double(), [f.double() for f in fs])
    err = ((y.double() - ref).norm() / ref.norm()).item()
    line = f"{batch}x{ps}: forward {graph_time(lambda: K._forward(x, fs)):.1f} us (rel err {err:.1e})"
    if save:
        g = torch.randn_like(y)
        needs = [True] * (len(ps) + 1)
        _, saved = K._forward(x, fs, save=True)
        line += (f", forward(save) {graph_time(lambda: K._forward(x, fs, save=True)):.1f} us,"
                 f" backward(kept) {graph_time(lambda: K._backward(x, fs, g, needs, saved)):.1f} us")
    print(line, flush=True)
