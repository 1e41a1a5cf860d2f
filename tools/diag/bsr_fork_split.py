"""The captured layer backward (CUDA graph, graphtime.py) with the weight gradient on a side stream
(bsr._concurrent_grads) and in order, with and without the bias gradient, alternating twice: device
µs per backward and the bench's backward-per-FLOP ratio (bwd / 2 / fwd). Run once per setting of
SPARSEKERN_BSR_SDD_SPLIT (the weight gradient's K splits, read once per process): a split sdd fills
every SM and the input gradient's persistent kernel cannot start beside it.

argv: layers "dtype:in:out:block:density" (dtype bf16 | fp16 | tf32)."""
import os
import sys

import torch

from sparsekern import bsr
from graphtime import forward_for_capture, graph_time, layer_from_spec

tag = os.environ.get("SPARSEKERN_BSR_SDD_SPLIT", "auto")
for spec in sys.argv[1:]:
    layer, x, go = layer_from_spec(spec)
    with torch.no_grad():
        t_fwd = graph_time(lambda: layer(x))
    line = []
    for with_bias in (False, True):
        layer.bias.requires_grad_(with_bias)
        params = (layer.weight, layer.bias) if with_bias else (layer.weight,)
        s, xg, y = forward_for_capture(layer, x)

        def bwd():
            return torch.autograd.grad(y, (xg, *params), go, retain_graph=True)

        tb = {False: [], True: []}
        for _ in range(2):
            for conc in (False, True):
                bsr._concurrent_grads = conc
                tb[conc].append(graph_time(bwd, stream=s))
        bsr._concurrent_grads = True
        line.append(f"{'bias' if with_bias else 'no bias'}: in order {'/'.join(f'{t:.1f}' for t in tb[False])}, "
                    f"side {'/'.join(f'{t:.1f}' for t in tb[True])} ({min(tb[True]) / 2 / t_fwd:.3f})")
    print(f"split={tag:4s} {spec:24s} fwd {t_fwd:6.1f} | " + " | ".join(line), flush=True)
