"""The natural split's mode 0 through kron_head.h's pass (SPARSEKERN_KRON_HEAD=kernel, opt-in)
against cuBLAS's strided-batched GEMMs (the default), device time of a 20-call CUDA graph, forward
and native backward (every gradient), fp32, TF32 off, with the largest relative differences.

Usage: python tools/diag/kron_head.py [BATCH:P1,P2,...] ...   (default: session 12's six cases)
"""
from __future__ import annotations

import os
import sys

import torch

from sparsekern import kron_matmul
from sparsekern import kron as K
from sparsekern.bench import graph_time_ms

from kron_profile import square_case  # this folder

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator().manual_seed(0)
cases = [(256, [16, 16, 16, 16]), (1024, [16, 16, 16, 16]), (128, [32, 32, 32]), (512, [32, 32, 32]),
         (64, [8, 8, 8, 8, 8]), (16, [16, 16, 16, 16])]
if len(sys.argv) > 1:
    cases = [(int(a.split(":")[0]), [int(p) for p in a.split(":")[1].split(",")]) for a in sys.argv[1:]]
for batch, sizes in cases:
    x, fs, gy = square_case(batch, sizes, g, dev)
    needs = [True] * (len(fs) + 1)
    t, out = {}, {}
    for head in ["gemm", "kernel"]:
        os.environ["SPARSEKERN_KRON_HEAD"] = head  # read at every plan
        t["fwd " + head] = 1e3 * graph_time_ms(lambda: kron_matmul(x, fs), dev)
        t["bwd " + head] = 1e3 * graph_time_ms(lambda: K._backward(x, fs, gy, needs), dev)
        out[head] = [kron_matmul(x, fs)] + K._backward(x, fs, gy, needs)
    os.environ.pop("SPARSEKERN_KRON_HEAD")
    diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(out["kernel"], out["gemm"]))
    print(f"{batch}x{sizes}: fwd gemm {t['fwd gemm']:7.1f} kernel {t['fwd kernel']:7.1f} | "
          f"bwd gemm {t['bwd gemm']:7.1f} kernel {t['bwd kernel']:7.1f} | diff {diff:.1e}", flush=True)
