"""Device time of the kron backward (every gradient, states recomputed: K._backward) under several
backward-kernel selections, alternated within each round in one process (graph-replayed,
tools/diag/graphtime.py), with the forward's time and each selection's largest relative error
against float64. Usage: python kron_bwd_sel_times.py "SEL1;SEL2;..." ROUNDS "BATCH P1,P2,..." ...
(square fp32 factors, TF32 off; SEL as for _C.kron_set_backward_kernel)"""
import sys

import torch
from graphtime import graph_time  # this folder
from kron_profile import square_case_with_grads

from sparsekern import _C
from sparsekern import kron as K

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
sels, rounds, cases = sys.argv[1].split(";"), int(sys.argv[2]), sys.argv[3:]
g = torch.Generator().manual_seed(0)
for case in cases:
    batch, ps, x, fs, gy, needs, want = square_case_with_grads(case, g, dev)
    fwd = graph_time(lambda: K.kron_matmul(x, fs))  # µs per call
    us = {s: [] for s in sels}
    err = {}
    try:
        for s in sels:
            _C.kron_set_backward_kernel(s)
            got = K._backward(x, fs, gy, needs)
            err[s] = max(((a.double() - w).norm() / w.norm()).item() for a, w in zip(got, want))
        for _ in range(rounds):
            for s in sels:
                _C.kron_set_backward_kernel(s)
                us[s].append(graph_time(lambda: K._backward(x, fs, gy, needs)))
    finally:
        _C.kron_set_backward_kernel("")
    parts = " | ".join(f"{s}: " + " ".join(f"{u:6.1f}" for u in us[s]) + f" ({min(us[s]) / fwd:.2f}x, err {err[s]:.1e})"
                       for s in sels)
    print(f"{batch}x{ps}: fwd {fwd:6.1f} us | {parts}", flush=True)
