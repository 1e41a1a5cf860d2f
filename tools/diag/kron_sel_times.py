"""Device time of kron forwards under several forward-kernel selections, interleaved in one process.
Usage: python kron_sel_times.py --sel SEL1;SEL2;... [--rounds R] [--save] "BATCH P1,P2,..." ...
Square fp32 factors, TF32 off; for each round, case and selection: the graph-replayed forward
(tools/diag/graphtime.py), its error against the float64 reference, and with --save the training
forward that keeps its state for the backward."""
import math
import sys

import torch
from graphtime import graph_time  # this folder (python puts a script's folder on sys.path)

from sparsekern import _C
from sparsekern import kron as K

args = sys.argv[1:]
sels = args[args.index("--sel") + 1].split(";")
rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 2
save = "--save" in args
skip = {"--sel", "--rounds"}
cases = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] not in skip)]
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
data = {}
for case in cases:
    b, ps = case.split()
    batch, ps = int(b), [int(v) for v in ps.split(",")]
    x = torch.randn(batch, math.prod(ps), device=dev)
    fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for p in ps]
    data[case] = (x, fs, K.kron_reference(x.double(), [f.double() for f in fs]))
for r in range(rounds):
    for case, (x, fs, ref) in data.items():
        for sel in sels:
            _C.kron_set_forward_kernel(sel)
            y = K._forward(x, fs)
            err = ((y.double() - ref).norm() / ref.norm()).item()
            line = f"round {r + 1} {case:14s} {sel:22s} forward {graph_time(lambda: K._forward(x, fs)):7.1f} us"
            if save:
                line += f", forward(save) {graph_time(lambda: K._forward(x, fs, save=True)):7.1f} us"
            print(line + f" (rel err {err:.1e})", flush=True)
_C.kron_set_forward_kernel("")
