"""One kron backward as training runs it (the forward keeps its states, the backward reads them),
for ncu (--kernel-name regex:...) or a device time.
Usage: python kron_bwd_kept.py BATCH P1,P2,... [--time]   (square fp32 factors, TF32 off)
--time: median kernel time of 50 graph-replayed forward+save and backward calls each."""
import math
import sys

import torch

from sparsekern import kron as K

batch = int(sys.argv[1])
ps = [int(v) for v in sys.argv[2].split(",")]
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
x = torch.randn(batch, math.prod(ps), device=dev)
fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for p in ps]
g = torch.randn(batch, math.prod(ps), device=dev)
needs = [True] * (len(ps) + 1)
for _ in range(3):
    y, saved = K._forward(x, fs, save=True)
    K._backward(x, fs, g, needs, saved)
torch.cuda.synchronize()


def graph_time(fn, n=50):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr, stream=s):
            for _ in range(n):
                fn()
    torch.cuda.current_stream().wait_stream(s)
    ts = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        gr.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / n)
    return sorted(ts)[2]


if "--time" in sys.argv:
    tf = graph_time(lambda: K._forward(x, fs, save=True))
    tb = graph_time(lambda: K._backward(x, fs, g, needs, saved))
    print(f"{batch}x{ps}: forward(save) {tf:.1f} us, backward(kept) {tb:.1f} us, ratio {tb / tf:.2f}")
