"""Why the eager backward rows of the bsr bench moved with the concurrent weight gradient: per
layer, the bench's eager timing (sparsekern.bench.time_ms: per-call CUDA events, median) and the
CUDA-graph time, concurrent off / on alternating twice, the host time of one backward call, and
the kernels of one eager call on their streams (torch profiler: start offset and duration, µs).

argv: layers "dtype:in:out:block:density" (no bias, as the bench)."""
import sys
import time

import torch

import sparsekern
from sparsekern import bsr
from sparsekern.bench import time_ms
from graphtime import forward_for_capture, graph_time

dev = torch.device("cuda")
DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}
m = 8192
for spec in sys.argv[1:]:
    name, k_in, n_out, b, d = spec.split(":")
    dtype = DT[name]
    k_in, n_out, b, d = int(k_in), int(n_out), int(b), float(d)
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    g = torch.Generator().manual_seed(0)
    layer = sparsekern.BlockSparseLinear(k_in, n_out, bias=False, density=d, block_size=b, device=dev,
                                         dtype=dtype, generator=g)
    x = torch.randn(m, k_in, generator=g).to(dev, dtype).requires_grad_()
    go = torch.randn(m, n_out, generator=g).to(dev, dtype)
    y = layer(x)

    def bwd():
        return torch.autograd.grad(y, (x, layer.weight), go, retain_graph=True)

    res = {False: [], True: []}
    for _ in range(2):
        for conc in (False, True):
            bsr._concurrent_grads = conc
            t_eager = time_ms(bwd, dev) * 1e3
            bwd()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                bwd()
            host = (time.perf_counter() - t0) / 20 * 1e6
            torch.cuda.synchronize()
            res[conc].append((t_eager, host))
    del y  # its graph would tie the capture below to the default stream
    s, xg, yg = forward_for_capture(layer, x.detach())
    dev_t = {}
    for conc in (False, True):
        bsr._concurrent_grads = conc
        dev_t[conc] = graph_time(lambda: torch.autograd.grad(yg, (xg, layer.weight), go, retain_graph=True), stream=s)
    line = " | ".join(f"{'conc' if c else 'order'}: eager {'/'.join(f'{e:.1f}' for e, _ in res[c])} host "
                      f"{'/'.join(f'{h:.1f}' for _, h in res[c])} graph {dev_t[c]:.1f}" for c in (False, True))
    print(f"{spec} | {line}", flush=True)
    from torch.profiler import ProfilerActivity, profile
    y = layer(x)
    for conc in (False, True):
        bsr._concurrent_grads = conc
        bwd()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            bwd()
            torch.cuda.synchronize()
        evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        if evs:
            t0 = min(e.time_range.start for e in evs)
            print(f"   {'conc' if conc else 'order'}: " + "; ".join(
                f"{e.name[:38]} s{getattr(e, 'device_resource_id', '?')} @{e.time_range.start - t0:.0f}+{e.time_range.elapsed_us():.0f}"
                for e in sorted(evs, key=lambda e: e.time_range.start)), flush=True)
    bsr._concurrent_grads = True
