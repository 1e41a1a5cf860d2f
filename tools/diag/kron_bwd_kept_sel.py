"""Device time of the kept-state kron backward (K._backward with the training forward's saved
states, as the bench's backward row) under several backward-kernel selections, alternated within
each round in one process (graph-replayed, tools/diag/graphtime.py), with the training forward's
time, each selection's largest relative error against float64, and the per-kernel device µs of
the first selection's backward (torch profiler).
Usage: python kron_bwd_kept_sel.py "SEL1;SEL2;..." ROUNDS "BATCH P1,P2,..." ...
(square fp32 factors, TF32 off; SEL as for _C.kron_set_backward_kernel; "" or auto = the default)"""
import sys

import torch
from graphtime import graph_time, kernel_times  # this folder
from kron_profile import square_case_with_grads

from sparsekern import _C
from sparsekern import kron as K

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
sels, rounds, cases = sys.argv[1].split(";"), int(sys.argv[2]), sys.argv[3:]
g = torch.Generator().manual_seed(0)


def kept_backward(x, fs, gy, needs):
    """The saved states of a training forward under the current selection (a selection change
    invalidates earlier ones), and a closure running the backward over them."""
    _, saved = K._forward(x, fs, save=True)
    return lambda: K._backward(x, fs, gy, needs, saved)


for case in cases:
    batch, ps, x, fs, gy, needs, want = square_case_with_grads(case, g, dev)
    fwd = graph_time(lambda: K._forward(x, fs, save=True))
    us = {s: [] for s in sels}
    err = {}
    try:
        for s in sels:
            _C.kron_set_backward_kernel(s)
            got = kept_backward(x, fs, gy, needs)()
            err[s] = max(((a.double() - w).norm() / w.norm()).item() for a, w in zip(got, want))
        _C.kron_set_backward_kernel(sels[0])
        kt = kernel_times(kept_backward(x, fs, gy, needs))
        for _ in range(rounds):
            for s in sels:
                _C.kron_set_backward_kernel(s)
                us[s].append(graph_time(kept_backward(x, fs, gy, needs)))
    finally:
        _C.kron_set_backward_kernel("")
    parts = " | ".join(f"{s or 'auto'}: " + " ".join(f"{u:6.1f}" for u in us[s])
                       + f" ({min(us[s]) / fwd:.2f}x, err {err[s]:.1e})" for s in sels)
    print(f"{batch}x{ps}: fwd(save) {fwd:6.1f} us | {parts}", flush=True)
    print("   kernels of " + (sels[0] or "auto") + ": "
          + ", ".join(f"{k} {v:.1f}" for k, v in sorted(kt.items(), key=lambda kv: -kv[1])), flush=True)
