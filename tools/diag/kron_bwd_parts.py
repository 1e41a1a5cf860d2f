"""Where the small-factor backward's time goes, without ncu: its device time (CUDA graph of 20
calls) when only some gradients are asked for. The kernel always runs the n − 1 recompute passes
and the pull-backs of modes n − 1 … 1, the pull-back of mode 0 only for ∂ℓ/∂X, and the contraction
of mode t only for ∂ℓ/∂Fₜ (kron_small_bwd.h): "all" − "dX" is the n contraction passes, and
"dX" − "dF t" a pull-back pass less one contraction pass. fp32, TF32 off.

Usage: python tools/diag/kron_bwd_parts.py [SEL]   (SEL: the backward selection, default "small")
"""
from __future__ import annotations

import sys

import torch

from sparsekern import _C
from sparsekern import kron as K
from sparsekern.bench import graph_time_ms

from kron_profile import square_case  # this folder

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
_C.kron_set_backward_kernel(sys.argv[1] if len(sys.argv) > 1 else "small")
g = torch.Generator().manual_seed(0)
for batch, sizes in [(1024, [8, 8, 8, 8]), (1024, [16, 16, 16]), (1024, [4, 4, 4, 4, 4])]:
    x, fs, gy = square_case(batch, sizes, g, dev)
    n = len(fs)
    fwd = 1e3 * graph_time_ms(lambda: K.kron_matmul(x, fs), dev)
    parts = {"all": [True] * (n + 1), "dX": [True] + [False] * n, "dF all": [False] + [True] * n}
    for t in range(n):
        parts[f"dF{t}"] = [False] + [u == t for u in range(n)]
    out = [f"{batch}x{sizes} fwd {fwd:.1f}"]
    for name, needs in parts.items():
        us = 1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs), dev)
        out.append(f"{name} {us:.1f}")
    print(" | ".join(out), flush=True)
_C.kron_set_backward_kernel("")
