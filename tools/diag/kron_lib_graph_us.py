"""Device µs per call of sparsekern.kron_matmul (fp32, TF32 off) from a CUDA graph of 20 calls, best
of 10 replays: the library's number next to tools/diag/kron_lane.cu's. Args: ROWS:P1,P2 ..."""
import math
import sys

import torch

import sparsekern

torch.backends.cuda.matmul.allow_tf32 = False
for spec in sys.argv[1:]:
    rows, ps = spec.split(":")
    ps = [int(p) for p in ps.split(",")]
    x = torch.randn(int(rows), math.prod(ps), device="cuda")
    fs = [torch.randn(p, p, device="cuda") / math.sqrt(p) for p in ps]
    for _ in range(3):
        sparsekern.kron_matmul(x, fs)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            for _ in range(20):
                sparsekern.kron_matmul(x, fs)
    best = 1e30
    for _ in range(10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        best = min(best, e0.elapsed_time(e1))
    print(f"library {spec}: {best * 1000 / 20:.2f} us per call")
