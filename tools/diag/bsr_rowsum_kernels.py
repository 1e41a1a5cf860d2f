"""Where the fused bias gradient's time goes: the kernels (torch profiler, µs per backward) of a
BlockSparseLinear backward (8192 rows; dX, dW, bias) with the row sums fused into the weight
gradient's sdd and with the separate column sums (bsr._fused_bias_grad True / False).

argv: layers "dtype:in:out:block:density" (dtype bf16 | fp16 | tf32)."""
import sys

import torch

import sparsekern
from sparsekern import bsr
from graphtime import kernel_times

dev = torch.device("cuda")
DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}
for spec in sys.argv[1:]:
    name, k_in, n_out, b, d = spec.split(":")
    dtype = DT[name]
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    g = torch.Generator().manual_seed(0)
    layer = sparsekern.BlockSparseLinear(int(k_in), int(n_out), density=float(d), block_size=int(b), device=dev,
                                         dtype=dtype, generator=g)
    x = torch.randn(8192, int(k_in), generator=g).to(dev, dtype).requires_grad_()
    go = torch.randn(8192, int(n_out), generator=g).to(dev, dtype)
    y = layer(x)
    for fused in (False, True):
        bsr._fused_bias_grad = fused
        ks = kernel_times(lambda: torch.autograd.grad(y, (x, layer.weight, layer.bias), go, retain_graph=True), 10, 60)
        body = "; ".join(f"{k} {v:.1f}" for k, v in sorted(ks.items(), key=lambda kv: -kv[1]))
        print(f"{spec} {'fused' if fused else 'separate'}: sum {sum(ks.values()):.1f} | {body}", flush=True)
