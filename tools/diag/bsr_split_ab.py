"""Split-K of the sdd, priced: per layer (8192 rows, bf16; BSR_DTYPE=tf32 for fp32 with TF32, fp16), the device time (CUDA
graph, tools/diag/graphtime.py) of the weight-gradient sdd alone, of the layer's backward (dX and
dW, no bias gradient) and of its forward. Run once per SPARSEKERN_BSR_SDD_SPLIT setting (read once
per process), e.g. 0 and auto, alternating, and compare the lines.

argv: layers "in:out:block:density" (default: the bench's BERT-base rows and the 4096 → 4096 cells
with fewer 64-row slices than SMs)."""
import os
import sys

import torch

import sparsekern
from sparsekern import bsr
from graphtime import forward_for_capture, graph_time

dev = torch.device("cuda")
dtype_name = os.environ.get("BSR_DTYPE", "bf16")
dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[dtype_name]
torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
layers = sys.argv[1:] or ["3072:768:128:0.1", "768:3072:128:0.1", "3072:768:128:0.5", "768:3072:128:0.5",
                          "4096:4096:128:0.05", "4096:4096:64:0.05", "1024:4096:128:0.1", "4096:1024:64:0.1"]
m = 8192
split = os.environ.get("SPARSEKERN_BSR_SDD_SPLIT", "auto")
for spec in layers:
    k_in, n_out, b, d = spec.split(":")
    k_in, n_out, b, d = int(k_in), int(n_out), int(b), float(d)
    g = torch.Generator().manual_seed(0)
    layer = sparsekern.BlockSparseLinear(k_in, n_out, density=d, block_size=b, device=dev, dtype=dtype,
                                         generator=g)
    layer.bias.requires_grad_(False)
    x = torch.randn(m, k_in, generator=g).to(dev, dtype)
    go = torch.randn(m, n_out, generator=g).to(dev, dtype)
    pattern = layer.weight_matrix
    ws_bytes = sparsekern._C.bsr_sdd_split_bytes(n_out, m, k_in, b, pattern.nnz_blocks, dtype_name == "tf32", 0,
                                                  str(dtype)[6:])

    def sdd():
        return bsr.sdd(go.t(), x, pattern)

    # correctness of the timed sdd against float64 on the pattern
    ref = (go.t().double() @ x.double())
    grid = ref.reshape(n_out // b, b, k_in // b, b).permute(0, 2, 1, 3)
    want = grid[layer.block_row_indices.long(), layer.block_col_indices.long()]
    err = ((sdd().values.double() - want).norm() / want.norm()).item()

    s, xg, y = forward_for_capture(layer, x)  # the backward's graph is built on the capture stream

    def bwd():
        return torch.autograd.grad(y, (xg, layer.weight), go, retain_graph=True)

    def fwd():
        return layer(x)

    t_sdd = graph_time(sdd)
    t_bwd = graph_time(bwd, stream=s)
    t_fwd = graph_time(fwd)
    print(f"{dtype_name} split={split:4s} {k_in}->{n_out} b={b} d={d} nnz={pattern.nnz_blocks:4d} ws={ws_bytes >> 10:6d} KiB | "
          f"sdd {t_sdd:7.1f} us  bwd {t_bwd:7.1f} us  fwd {t_fwd:7.1f} us  bwd/2/fwd {t_bwd / 2 / t_fwd:5.2f} | "
          f"sdd rel err {err:.1e}", flush=True)
