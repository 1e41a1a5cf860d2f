"""The input-gradient dds of small layers (dX = dY · W, Bop = S), priced per kernel choice: device
µs (CUDA graph, tools/diag/graphtime.py) of bsr.dds(dY, W) at 8192 rows, bf16, next to the write
floor of its output (m · in_features · 2 bytes at 3.0 TB/s) and the forward's dds. Run once per
setting of SPARSEKERN_BSR_GROUPED / SPARSEKERN_BSR_SCHEDULE / SPARSEKERN_BSR_SM90 (read once per
process) and compare the lines.

argv: layers "in:out:block:density" (default: BERT-base rows where the backward is slow)."""
import os
import sys

import torch

import sparsekern
from sparsekern import bsr
from graphtime import graph_time

dev = torch.device("cuda")
layers = sys.argv[1:] or ["3072:768:128:0.1", "3072:768:128:0.5", "768:3072:128:0.1", "3072:768:64:0.1",
                          "1024:4096:128:0.1"]
m = 8192
tag = " ".join(f"{k[14:]}={os.environ[k]}" for k in sorted(os.environ) if k.startswith("SPARSEKERN_BSR_")) or "default"
for spec in layers:
    k_in, n_out, b, d = spec.split(":")
    k_in, n_out, b, d = int(k_in), int(n_out), int(b), float(d)
    g = torch.Generator().manual_seed(0)
    layer = sparsekern.BlockSparseLinear(k_in, n_out, density=d, block_size=b, device=dev, dtype=torch.bfloat16,
                                         generator=g)
    w = layer.weight_matrix.detach()
    x = torch.randn(m, k_in, generator=g).to(dev, torch.bfloat16)
    go = torch.randn(m, n_out, generator=g).to(dev, torch.bfloat16)
    with torch.no_grad():
        dx = bsr.dds(go, w)
        ref = go.double() @ w.to_dense().double()
        err = ((dx.double() - ref).norm() / ref.norm()).item()
        t_dx = graph_time(lambda: bsr.dds(go, w))
        t_fwd = graph_time(lambda: bsr.dds(x, w.t()))
    floor = m * k_in * 2 / 3.0e12 * 1e6
    print(f"{tag:28s} {k_in}->{n_out} b={b} d={d}: dX dds {t_dx:6.1f} us (write floor {floor:5.1f}), "
          f"fwd dds {t_fwd:6.1f} us, rel err {err:.1e}", flush=True)
