"""Where a kron backward's time goes, per case of issue 5's table (fp32, TF32 off), CUDA only.

Per case, forward and backward (∂ℓ/∂x and every ∂ℓ/∂F, `torch.autograd.grad` on a graph built
once, as `sparsekern bench` times it):
  eager   CUDA-event median of single calls (what the bench reports);
  device  20 calls replayed from a CUDA graph, per call (no host work);
  host    µs per call of back-to-back calls without synchronisation (the host side);
  direct  host µs of the implementation the autograd Function calls (kron._backward or
          kron._backward_steps, whichever runs), without autograd;
  kernels the kernels of one backward (torch.profiler), µs each;
  recompute the backward's device time when its forward did not keep its intermediate states
          (SPARSEKERN_KRON_SAVE_STATES=0);
  forced  the device time of each backward implementation (SPARSEKERN_KRON_BWD=fused / steps).
Then the tiled transpose against torch's strided copy.
Then a cProfile of the backward of the smallest case.

Usage: python tools/diag/kron_bwd_where.py [JSON]
"""
from __future__ import annotations

import cProfile
import json
import math
import os
import pstats
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from diag_timing import host_us_per_call  # this folder

from sparsekern import kron as K
from sparsekern.bench import graph_time_ms, time_ms
from sparsekern.bench.kron import FULL

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
sync = torch.cuda.synchronize


def kernel_list(fn, reps=10):
    fn()
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        sync()
    ks = [(e.key, e.device_time_total / reps) for e in prof.key_averages()
          if e.device_time_total > 0 and e.key and not e.key.startswith("cuda")]
    ks.sort(key=lambda kv: -kv[1])
    return [(name[:60], round(us, 1)) for name, us in ks]


rows = []
g = torch.Generator().manual_seed(0)
for batch, sizes in FULL:
    P = math.prod(sizes)
    x = torch.randn(batch, P, generator=g).to(dev).requires_grad_()
    fs = [(torch.randn(p, p, generator=g) / math.sqrt(p)).to(dev).requires_grad_() for p in sizes]
    gy = torch.randn(batch, P, generator=g).to(dev)
    steps = K._steps_wanted(x, fs)
    cap = torch.cuda.Stream()
    cap.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(cap):  # leaves of its own: a leaf's gradient node keeps its first stream
        xc = x.detach().clone().requires_grad_()
        fc = [f.detach().clone().requires_grad_() for f in fs]
        y_cap = K.kron_matmul(xc, fc)
    torch.cuda.current_stream().wait_stream(cap)
    y = K.kron_matmul(x, fs)

    def fwd():
        with torch.no_grad():
            return K.kron_matmul(x, fs)

    def bwd(y=y, x=x, fs=fs):
        return torch.autograd.grad(y, [x, *fs], gy, retain_graph=True)

    impl = K._backward_steps if steps else K._backward
    xd, fd = x.detach(), [f.detach() for f in fs]

    def direct():
        return impl(xd, fd, gy, [True] * (len(fs) + 1))

    r = {"case": f"{batch}x{sizes}", "bwd_impl": "steps" if steps else "fused",
         "fwd_eager_us": 1e3 * time_ms(fwd, dev), "fwd_device_us": 1e3 * graph_time_ms(fwd, dev),
         "bwd_eager_us": 1e3 * time_ms(bwd, dev),
         "bwd_device_us": 1e3 * graph_time_ms(lambda: bwd(y_cap, xc, fc), dev, stream=cap),
         "bwd_host_us": host_us_per_call(bwd, sync, calls=200, repeats=3, warmup=10),
         "direct_host_us": host_us_per_call(direct, sync, calls=200, repeats=3, warmup=10),
         "fwd_host_us": host_us_per_call(fwd, sync, calls=200, repeats=3, warmup=10),
         "bwd_kernels": kernel_list(bwd)}
    # The same backward when the forward does not keep its intermediate states (recompute).
    os.environ["SPARSEKERN_KRON_SAVE_STATES"] = "0"
    with torch.cuda.stream(cap):
        x0 = x.detach().clone().requires_grad_()
        f0 = [f.detach().clone().requires_grad_() for f in fs]
        y0 = K.kron_matmul(x0, f0)
    torch.cuda.current_stream().wait_stream(cap)
    os.environ.pop("SPARSEKERN_KRON_SAVE_STATES")
    r["kept_states"] = getattr(y_cap.grad_fn, "kron_states", None) is not None
    # Both backward implementations, forced (forward and backward under the same setting).
    for impl_name in ("fused", "steps"):
        os.environ["SPARSEKERN_KRON_BWD"] = impl_name
        with torch.cuda.stream(cap):
            xi = x.detach().clone().requires_grad_()
            fi = [f.detach().clone().requires_grad_() for f in fs]
            yi = K.kron_matmul(xi, fi)
        torch.cuda.current_stream().wait_stream(cap)
        r[f"bwd_device_{impl_name}_us"] = 1e3 * graph_time_ms(lambda: bwd(yi, xi, fi), dev, stream=cap)
        os.environ.pop("SPARSEKERN_KRON_BWD")
        del xi, fi, yi
    r["bwd_device_recompute_us"] = 1e3 * graph_time_ms(lambda: bwd(y0, x0, f0), dev, stream=cap)
    r["bwd/fwd eager"] = r["bwd_eager_us"] / r["fwd_eager_us"]
    r["bwd/fwd device"] = r["bwd_device_us"] / r["fwd_device_us"]
    rows.append(r)
    print(f"{r['case']:18s} {r['bwd_impl']:5s} fwd eager/dev/host {r['fwd_eager_us']:7.1f} {r['fwd_device_us']:7.1f} "
          f"{r['fwd_host_us']:6.1f} | bwd eager/dev/host/direct {r['bwd_eager_us']:7.1f} {r['bwd_device_us']:7.1f} "
          f"{r['bwd_host_us']:6.1f} {r['direct_host_us']:6.1f} | b/f eager {r['bwd/fwd eager']:.2f} "
          f"device {r['bwd/fwd device']:.2f} | kept states {r['kept_states']}, recompute bwd device "
          f"{r['bwd_device_recompute_us']:.1f} | forced fused / steps {r['bwd_device_fused_us']:.1f} / "
          f"{r['bwd_device_steps_us']:.1f}", flush=True)
    print("    kernels:", "; ".join(f"{n} {us}" for n, us in r["bwd_kernels"][:6]), flush=True)
    del x, fs, gy, y, y_cap, xc, fc, x0, f0, y0

# The transposed copy of the step-wise backward: the library's tiled kernel against torch's.
from sparsekern import _C  # noqa: E402
from sparsekern._core import as_dlpack  # noqa: E402
for nr, nc in ((4096, 4096), (1024, 4096), (128, 32768)):  # not `rows`: that is the results list
    t = torch.randn(nr, nc, device=dev)
    o = torch.empty(nc, nr, device=dev)
    ours = graph_time_ms(lambda: _C.transpose(as_dlpack(t), as_dlpack(o), torch.cuda.current_stream().cuda_stream), dev)
    theirs = graph_time_ms(lambda: t.mT.contiguous(), dev)
    gbs = 2 * t.numel() * 4 / 1e3
    print(f"transpose {nr}x{nc} fp32: ours {1e3 * ours:.1f} µs ({gbs / (1e3 * ours):.0f} GB/s), "
          f"torch {1e3 * theirs:.1f} µs ({gbs / (1e3 * theirs):.0f} GB/s)", flush=True)

# cProfile of the smallest case's backward (host side).
x = torch.randn(16, 1024, device=dev, requires_grad=True)
fs = [(torch.randn(32, 32, device=dev) / 6).requires_grad_() for _ in range(2)]
gy = torch.randn(16, 1024, device=dev)
y = K.kron_matmul(x, fs)
for _ in range(50):
    torch.autograd.grad(y, [x, *fs], gy, retain_graph=True)
sync()
pr = cProfile.Profile()
pr.enable()
for _ in range(2000):
    torch.autograd.grad(y, [x, *fs], gy, retain_graph=True)
pr.disable()
sync()
pstats.Stats(pr).sort_stats("tottime").print_stats(14)
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
