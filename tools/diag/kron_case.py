"""A kron case of the diagnostics in this folder from its command-line form "BATCH P1,P2,...":
square fp32 factors scaled by 1/sqrt(p), x and ∂ℓ/∂y of N(0, 1), every gradient wanted, and the
states a training forward keeps."""
import math
from types import SimpleNamespace

import torch

from sparsekern import kron as K


def kron_case(case: str, dev: torch.device) -> SimpleNamespace:
    b, ps = case.split()
    batch, ps = int(b), [int(v) for v in ps.split(",")]
    x = torch.randn(batch, math.prod(ps), device=dev)
    fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for p in ps]
    g = torch.randn(batch, math.prod(ps), device=dev)
    _, saved = K._forward(x, fs, save=True)
    return SimpleNamespace(batch=batch, ps=ps, x=x, fs=fs, g=g, needs=[True] * (len(ps) + 1), saved=saved)
