"""The layer backward with the bias gradient, captured the way torch.cuda.graph's documentation
does it (warm-up calls on one stream, the capture on another, as sparsekern.testing.capture_graph
does), so that the capture stream has no ones vector for the bias GEMV: device µs per replayed
backward with the library's column-sum pass next to the weight gradient (bsr._fused_bias_grad, the
default) against the sdd alone plus _column_sums, which falls back to torch's sum in a capture
(bsr._fused_bias_grad = False: the kernels that path ran before session 28), alternating twice,
side stream on (the default) and off; and the bias gradients' agreement with float64.

argv: layers "dtype:in:out:block:density" (dtype bf16 | fp16 | tf32)."""
import sys

import torch

from sparsekern import bsr
from sparsekern.testing import capture_graph, rel_error
from graphtime import layer_from_spec, replay_time

n_calls = 20
for spec in sys.argv[1:]:
    layer, x, go = layer_from_spec(spec)
    params = (layer.weight, layer.bias)

    def step():
        outs = None
        for _ in range(n_calls):
            xg = x.clone().requires_grad_()
            outs = torch.autograd.grad(layer(xg), (xg, *params), go)
        return outs

    res = {}
    for rnd in range(2):
        for conc in (True, False):
            for fused in (True, False):
                bsr._concurrent_grads, bsr._fused_bias_grad = conc, fused
                graph, outs = capture_graph(step, warmups=1)
                graph.replay()
                torch.cuda.synchronize()
                t = replay_time(graph, n_calls, 3)
                err = rel_error(outs[2], go.double().sum(0))
                res.setdefault((conc, fused), []).append((t, err))
                del graph, outs
    bsr._concurrent_grads, bsr._fused_bias_grad = True, True
    parts = []
    for conc in (True, False):
        for fused in (True, False):
            r = res[(conc, fused)]
            parts.append(f"{'side' if conc else 'order'} {'pass' if fused else 'torch sum'} "
                         f"{'/'.join(f'{t:.1f}' for t, _ in r)} (err {max(e for _, e in r):.1e})")
    print(f"{spec:24s} fwd+bwd us per call (graph of {n_calls}): " + " | ".join(parts), flush=True)
