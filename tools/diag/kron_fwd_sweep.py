"""Device time (50 graph-replayed calls, median of 5 replays) of kron forwards under several forward
kernel selections (sparsekern._C.kron_set_forward_kernel), one process: for tuning the plan's
defaults on the issue-5 cases that miss their roofline target. fp32, TF32 off. Prints one line per
(case, selection) with the time, the roofline time of the issue (FLOPs / 50.9 TFLOP/s vs bytes /
copy bandwidth measured here) and its percentage; a selection the plan refuses prints its error.
(Session 14's results timed the graph with a copy of kron_fwd_one.py's loop, the median of 5
replays; it now uses sparsekern.bench.graph_time_ms.)"""
import math
import torch
from sparsekern import _C, kron_matmul
from sparsekern._core import as_dlpack
from sparsekern.bench import graph_time_ms

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")


def graph_time(fn, n=50):
    """Device µs per call: n calls in one CUDA graph, replays timed (sparsekern.bench)."""
    return graph_time_ms(fn, dev, calls=n) * 1e3


big = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
big2 = torch.empty_like(big)
copy_bw = 2 * big.numel() / (graph_time(lambda: big2.copy_(big), 10) * 1e-6)  # bytes/s
print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s")
import os
if os.environ.get("KRON_SWEEP") == "64":  # the two-factor 64 x 64 register-tile forward, 128 threads
    sels64 = ["auto", "new:threads=128", "new:threads=128,rows=1", "new:threads=128,rows=2",
              "new:threads=128,rows=3", "new:threads=128,rows=4", "new:threads=128,grid=264",
              "new:threads=128,rows=2,grid=264", "new:threads=128,rows=2,stages=1"]
    cases = {(m, (64, 64)): sels64 for m in (1024, 2048, 4096, 8192)}
    cases[(4096, (32, 32))] = ["auto", "new:threads=128"]
    cases[(4096, (16, 64))] = ["auto", "new:threads=128"]
    cases[(4096, (64, 32))] = ["auto", "new:threads=128"]
else:
    cases = {
        (1024, (64, 64)): ["auto", "new:rows=2", "new:rows=1", "new:rows=2,stages=1", "new:rows=8,stages=1",
                           "new:threads=128", "new:threads=128,rows=2", "new:grid=264,rows=2", "new:tile=4",
                           "new:tile=4,rows=8"],
        (4096, (64, 64)): ["auto", "new:rows=2", "new:rows=1", "new:threads=128,rows=2", "new:grid=264,rows=2"],
        (1024, (32, 32)): ["auto", "new:rows=2", "new:rows=1", "new:rows=8", "new:tile=8", "new:threads=128",
                           "new:grid=132", "new:rows=2,grid=512", "new:stages=1"],
        (1024, (16, 16, 16)): ["auto", "small:threads=128", "small:threads=256", "small:grid=132", "small:grid=396",
                               "small:grid=528", "new"],
    }
for (batch, ps), sels in cases.items():
    x = torch.randn(batch, math.prod(ps), device=dev)
    fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for p in ps]
    _C.kron_set_forward_kernel("auto")
    print(f"{batch}x{list(ps)} plan: " + _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], False).replace("\n", "; "), flush=True)
    ref = None
    flops = 2 * batch * math.prod(ps) * sum(ps)
    roof_us = max(flops / 50.9e12, 2 * x.numel() * 4 / copy_bw) * 1e6
    for sel in sels:
        try:
            _C.kron_set_forward_kernel(sel)
            y = kron_matmul(x, fs)
            if ref is None:
                ref = y.double()
            err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
            t = graph_time(lambda: kron_matmul(x, fs))
            print(f"{batch}x{list(ps)} {sel:24s} {t:7.1f} us  roof {roof_us:6.1f} us {100 * roof_us / t:5.1f}%  "
                  f"diff {err:.1e}", flush=True)
        except Exception as e:  # noqa: BLE001 - a refused selection is a result here
            print(f"{batch}x{list(ps)} {sel:24s} refused: {str(e)[:120]}", flush=True)
    _C.kron_set_forward_kernel("auto")
