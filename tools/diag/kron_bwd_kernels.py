"""Kernel times of one kron training backward (the forward keeps its states), per kernel name,
from torch.profiler over 20 calls. Usage: python kron_bwd_kernels.py "BATCH P1,P2,..." ..."""
import sys

import torch

from graphtime import kernel_times  # this folder
from kron_case import kron_case
from sparsekern import kron as K

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
for case in sys.argv[1:]:
    c = kron_case(case, dev)
    batch, ps, x, fs, g, needs, saved = c.batch, c.ps, c.x, c.fs, c.g, c.needs, c.saved
    per = kernel_times(lambda: K._backward(x, fs, g, needs, saved), reps=20, width=60)
    parts = "; ".join(f"{k} {v:.1f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]))
    print(f"{batch}x{ps}: kernels per backward (us): {parts}", flush=True)
