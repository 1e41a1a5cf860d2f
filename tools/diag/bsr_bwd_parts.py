"""Where a layer backward's device time goes: the input gradient (dds) and the weight gradient
(sdd, fused bias row sums) each alone, the whole captured backward with the weight gradient on a
side stream and in order, the forward, and the floors of the input gradient's output (a fill of
the same tensor); then one captured backward's kernels on a timeline (start and
end in µs from the first kernel, by the torch profiler over a graph replay), to see whether the two
branches overlap. Device µs from CUDA graphs (graphtime.py).

argv: layers "dtype:in:out:block:density" (dtype bf16 | fp16 | tf32; bias on, as in the bench)."""
import sys

import torch

from sparsekern import bsr
from graphtime import forward_for_capture, graph_time, layer_from_spec

dev = torch.device("cuda")
m = 8192


def timeline(fn, stream):
    """Kernels of one replay of a graph of fn() captured on `stream`: (name, start, end) in µs."""
    from torch.profiler import ProfilerActivity, profile
    with torch.cuda.stream(stream):
        fn()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            fn()
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        g.replay()
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not ev:
        return []
    t0 = min(e.time_range.start for e in ev)
    return sorted((e.name[:60], e.time_range.start - t0, e.time_range.end - t0) for e in ev)


for spec in sys.argv[1:] or ["bf16:3072:768:128:0.1"]:
    layer, x, go = layer_from_spec(spec, m)
    k_in, dtype = x.shape[1], x.dtype
    w = layer.weight_matrix.detach()
    params = (layer.weight, layer.bias)
    out = torch.empty(m, k_in, device=dev, dtype=dtype)
    with torch.no_grad():
        t_fwd = graph_time(lambda: layer(x))
        t_dx = graph_time(lambda: bsr.dds(go, w))
        t_dw = graph_time(lambda: bsr._sdd_impl(go.t(), x, w.values, w.index_sets(), w.shape[0], w.shape[1], True,
                                                row_sums="fused"))
        t_fill = graph_time(lambda: out.zero_())
    s, xg, y = forward_for_capture(layer, x)

    def bwd():
        return torch.autograd.grad(y, (xg, *params), go, retain_graph=True)

    tb = {}
    for conc in (False, True, False, True):
        bsr._concurrent_grads = conc
        tb.setdefault(conc, []).append(graph_time(bwd, stream=s))
    print(f"{spec}: fwd {t_fwd:.1f} | dX dds {t_dx:.1f} | dW sdd+row sums {t_dw:.1f} | bwd in order "
          f"{'/'.join(f'{t:.1f}' for t in tb[False])}, side stream {'/'.join(f'{t:.1f}' for t in tb[True])} "
          f"| bwd/2/fwd {min(tb[True]) / 2 / t_fwd:.3f} | fill of dX {t_fill:.1f} us", flush=True)
    for conc in (True, False):
        bsr._concurrent_grads = conc
        s, xg, y = forward_for_capture(layer, x)
        print(f"  timeline, side stream {'on' if conc else 'off'}:")
        for nm, a, e in timeline(bwd, s):
            print(f"    {a:7.1f} {e:7.1f} {e - a:6.1f}  {nm}")
    bsr._concurrent_grads = True
