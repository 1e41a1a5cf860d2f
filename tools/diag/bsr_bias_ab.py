"""The bias gradient from the weight gradient's sdd (SddParams::a_row_sums), priced: per layer
(8192 rows) the device time (CUDA graph, tools/diag/graphtime.py) of the layer's backward (dX, dW
and the bias gradient) with the fused row sums (bsr._fused_bias_grad = True, the default) and with
the separate column sums (False), alternating twice, and of its forward; the bias gradients of
both against float64.

argv: layers "dtype:in:out:block:density" (dtype bf16 | fp16 | tf32); default: the bench's TF32
and 16-bit cells near the 1.3 backward target and the BERT-base shapes."""
import sys

import torch

import sparsekern
from sparsekern import bsr
from graphtime import forward_for_capture, graph_time

dev = torch.device("cuda")
DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}
layers = sys.argv[1:] or [
    "tf32:4096:4096:64:0.1", "tf32:4096:4096:64:0.25", "tf32:4096:4096:128:0.1", "tf32:4096:4096:128:0.05",
    "tf32:4096:4096:64:0.5", "tf32:3072:768:128:0.1", "bf16:4096:4096:64:0.25", "bf16:4096:4096:32:0.1",
    "bf16:4096:4096:32:0.05", "bf16:3072:768:128:0.1", "bf16:4096:4096:128:0.1", "fp16:4096:4096:16:0.1"]
m = 8192
for spec in layers:
    name, k_in, n_out, b, d = spec.split(":")
    dtype = DT[name]
    k_in, n_out, b, d = int(k_in), int(n_out), int(b), float(d)
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    g = torch.Generator().manual_seed(0)
    layer = sparsekern.BlockSparseLinear(k_in, n_out, density=d, block_size=b, device=dev, dtype=dtype,
                                         generator=g)
    x = torch.randn(m, k_in, generator=g).to(dev, dtype)
    go = torch.randn(m, n_out, generator=g).to(dev, dtype)
    ref_b = go.double().sum(0)
    errs = []
    for fused in (True, False):
        bsr._fused_bias_grad = fused
        xg = x.clone().requires_grad_()
        gb = torch.autograd.grad(layer(xg), (xg, layer.weight, layer.bias), go)[2]
        errs.append(((gb.double() - ref_b).norm() / ref_b.norm()).item())

    s, xg, y = forward_for_capture(layer, x)  # the backward's graph is built on the capture stream

    def bwd():
        return torch.autograd.grad(y, (xg, layer.weight, layer.bias), go, retain_graph=True)

    times = {True: [], False: []}
    for _ in range(2):
        for fused in (False, True):
            bsr._fused_bias_grad = fused
            times[fused].append(graph_time(bwd, stream=s))
    bsr._fused_bias_grad = True
    t_fwd = graph_time(lambda: layer(x))
    tu, tf = min(times[False]), min(times[True])
    print(f"{name} {k_in}->{n_out} b={b} d={d} nnz={layer.weight_matrix.nnz_blocks:5d} | fwd {t_fwd:7.1f} us | bwd "
          f"separate {'/'.join(f'{t:.1f}' for t in times[False])} fused {'/'.join(f'{t:.1f}' for t in times[True])} us"
          f" | bwd/2/fwd {tu / 2 / t_fwd:5.3f} -> {tf / 2 / t_fwd:5.3f} | bias rel err fused {errs[0]:.1e} "
          f"separate {errs[1]:.1e}", flush=True)
