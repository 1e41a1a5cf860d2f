"""The layer backward with the weight gradient on a side stream (bsr._concurrent_grads) against the
same kernels in order, device µs per backward (CUDA graph, graphtime.py), alternating twice; the
forward's time and the bench's backward-per-FLOP ratio (bwd / 2 / fwd) either way; and whether the
gradients agree between the two orders.

argv: layers "dtype:in:out:block:density[:nobias]" (dtype bf16 | fp16 | tf32)."""
import sys

import torch

import sparsekern
from sparsekern import bsr
from graphtime import forward_for_capture, graph_time

dev = torch.device("cuda")
DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}
m = 8192
for spec in sys.argv[1:]:
    parts = spec.split(":")
    name, k_in, n_out, b, d = parts[:5]
    bias = not (len(parts) > 5 and parts[5] == "nobias")
    dtype = DT[name]
    k_in, n_out, b, d = int(k_in), int(n_out), int(b), float(d)
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    g = torch.Generator().manual_seed(0)
    layer = sparsekern.BlockSparseLinear(k_in, n_out, bias=bias, density=d, block_size=b, device=dev,
                                         dtype=dtype, generator=g)
    x = torch.randn(m, k_in, generator=g).to(dev, dtype)
    go = torch.randn(m, n_out, generator=g).to(dev, dtype)
    params = (layer.weight, layer.bias) if bias else (layer.weight,)
    grads = {}
    for conc in (False, True):
        bsr._concurrent_grads = conc
        xg = x.clone().requires_grad_()
        grads[conc] = torch.autograd.grad(layer(xg), (xg, *params), go)
    torch.cuda.synchronize()
    diff = max((u.float() - v.float()).abs().max().item() for u, v in zip(grads[False], grads[True]))

    s, xg, y = forward_for_capture(layer, x)

    def bwd():
        return torch.autograd.grad(y, (xg, *params), go, retain_graph=True)

    times = {False: [], True: []}
    for _ in range(2):
        for conc in (False, True):
            bsr._concurrent_grads = conc
            times[conc].append(graph_time(bwd, stream=s))
    bsr._concurrent_grads = False
    t_fwd = graph_time(lambda: layer(x))
    t0, t1 = min(times[False]), min(times[True])
    print(f"{spec} | fwd {t_fwd:7.1f} us | bwd in order {'/'.join(f'{t:.1f}' for t in times[False])} "
          f"concurrent {'/'.join(f'{t:.1f}' for t in times[True])} us | bwd/2/fwd {t0 / 2 / t_fwd:5.3f} -> "
          f"{t1 / 2 / t_fwd:5.3f} | max grad diff {diff:.1e}", flush=True)
