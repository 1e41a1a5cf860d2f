"""What semi.py's capture rules cost: device µs per replay of a captured SemiStructuredLinear
forward (no_grad) whose weight requires grad (compressed again inside the graph at every replay)
against the same layer frozen (requires_grad False: the graph reads the cached compressed weight),
and dense F.linear, 8192 × 4096 → 4096 with bias (issue 6's bench shape) and 8192 × 1024 → 4096.
capture_graph warms up on one stream and captures on another: before session 28's fix the capture
found no choice for its stream and ran the untimed default (cuSPARSELt's default configuration);
now it takes the way timed on the warm-up stream. The eager call's µs (timed choice) for scale."""
import torch
import torch.nn.functional as F

import sparsekern as sk
from sparsekern.testing import capture_graph
from graphtime import replay_time

dev = torch.device("cuda")
for dtype in (torch.float16, torch.bfloat16):
    for k, n in ((4096, 4096), (1024, 4096)):
        torch.manual_seed(0)
        layer = sk.SemiStructuredLinear.from_dense(torch.nn.Linear(k, n, device=dev, dtype=dtype))
        x = torch.randn(8192, k, device=dev, dtype=dtype)
        w_dense = (layer.weight * layer.mask).detach()
        out = {}
        for name in ("trained", "frozen", "dense"):
            layer.requires_grad_(name == "trained")
            fn = (lambda: F.linear(x, w_dense, layer.bias)) if name == "dense" else (lambda: layer(x))
            with torch.no_grad():
                fn()
                graph, _ = capture_graph(lambda: [fn() for _ in range(20)])
            out[name] = replay_time(graph, 20)
            del graph
        layer.requires_grad_(False)
        with torch.no_grad():
            a, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            layer(x)
            a.record()
            for _ in range(20):
                layer(x)
            e.record()
            e.synchronize()
            out["eager"] = a.elapsed_time(e) * 1e3 / 20
        print(f"{str(dtype)[6:]:8s} 8192x{k}->{n}: captured forward µs, weight requiring grad "
              f"{out['trained']:.1f} | frozen {out['frozen']:.1f} | dense F.linear {out['dense']:.1f} | eager frozen {out['eager']:.1f}", flush=True)
