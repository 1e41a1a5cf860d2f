"""Why a BlockSparseLinear forward's eager time in the bench moves between ~64 and ~100 µs on the
same tensors (session 20's bf16 b = 128 d = 0.1 cell: 100.8 / 65.2 / 98.6 µs in three rows of one
run): per cell, the bench's own timer (sparsekern.bench.time_ms) on ours alone after an idle pause,
on dense F.linear, on ours again right after it, the CUDA-graph device time of both
(graph_time_ms), the summed kernel time of one call (profiler) and the host time per call. Each
phase prints its wall-clock start (time.time()) so that an `nvidia-smi --query-gpu=timestamp,
clocks.sm,power.draw,clocks_throttle_reasons.active -lms 50` log taken alongside can be matched to it.

argv: cells "dtype:block:density" (default: the bench's bf16 target cells at blocks 32/64/128)."""
import sys
import time

import torch
import torch.nn.functional as F

import sparsekern
from sparsekern.bench import graph_time_ms, host_time_us, kernel_time_ms, time_ms

dev = torch.device("cuda")
cells = sys.argv[1:] or ["bfloat16:128:0.1", "bfloat16:64:0.1", "bfloat16:64:0.05", "bfloat16:32:0.1",
                         "bfloat16:128:0.25"]
m, k, n = 8192, 4096, 4096


def stamp(what, us):
    print(f"{time.time():.3f} {what:28s} {us:8.1f} us", flush=True)


for spec in cells:
    dt_name, b, d = spec.split(":")
    dt, b, d = getattr(torch, dt_name), int(b), float(d)
    g = torch.Generator().manual_seed(0)
    layer = sparsekern.BlockSparseLinear(k, n, density=d, block_size=b, device=dev, dtype=dt, generator=g)
    layer.bias.requires_grad_(False)
    x = torch.randn(m, k, generator=g).to(dev, dt)
    w = layer.dense_weight().detach().contiguous()
    bias = layer.bias.detach()

    def ours():
        return layer(x)

    def dense():
        return F.linear(x, w, bias)

    with torch.no_grad():
        ref = x.double() @ w.double().t() + bias.double()
        err = ((ours().double() - ref).norm() / ref.norm()).item()
    print(f"== {spec} rel err {err:.2e}", flush=True)
    torch.cuda.synchronize()
    time.sleep(2.0)
    stamp("ours eager (after idle)", 1e3 * time_ms(ours, dev))
    stamp("dense eager", 1e3 * time_ms(dense, dev))
    stamp("ours eager (after dense)", 1e3 * time_ms(ours, dev))
    stamp("dense eager", 1e3 * time_ms(dense, dev))
    stamp("ours eager (after dense)", 1e3 * time_ms(ours, dev))
    stamp("ours graph", 1e3 * graph_time_ms(ours, dev))
    stamp("dense graph", 1e3 * graph_time_ms(dense, dev))
    stamp("ours graph (after dense)", 1e3 * graph_time_ms(ours, dev))
    stamp("ours kernels", 1e3 * kernel_time_ms(ours, dev))
    stamp("dense kernels", 1e3 * kernel_time_ms(dense, dev))
    stamp("ours host", host_time_us(ours, dev))
    with torch.no_grad():
        stamp("ours eager no-grad", 1e3 * time_ms(ours, dev))
        stamp("ours host no-grad", host_time_us(ours, dev))
    del layer, x, w
    torch.cuda.empty_cache()
