"""Where a BlockSparseLinear forward's host time goes at the bench's shape (session 21: ~95 µs per
call with grad at 8192 x 4096 -> 4096, bf16, b = 128, d = 0.1, against 20-32 µs at m = 16): per
cell, the host time of each of 200 calls timed alone (no sync; median, 90th percentile, max: a call
that waits for the GPU shows as an outlier), then a torch.profiler table of 30 calls' host-side
events (Python ops and the CUDA runtime/driver calls CUPTI sees, ours included), sorted by self CPU
time.

argv: cells "dtype:block:density[:m]" (default bf16 b = 128 at d = 0.1 and 0.25, m = 8192 and 16)."""
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import sparsekern

dev = torch.device("cuda")
cells = sys.argv[1:] or ["bfloat16:128:0.1", "bfloat16:128:0.25", "bfloat16:128:0.1:16", "bfloat16:32:0.1"]
k = n = 4096
for spec in cells:
    parts = spec.split(":")
    dt, b, d = getattr(torch, parts[0]), int(parts[1]), float(parts[2])
    m = int(parts[3]) if len(parts) > 3 else 8192
    g = torch.Generator().manual_seed(0)
    layer = sparsekern.BlockSparseLinear(k, n, density=d, block_size=b, device=dev, dtype=dt, generator=g)
    layer.bias.requires_grad_(False)
    x = torch.randn(m, k, generator=g).to(dev, dt)
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            for _ in range(20):
                layer(x)
            torch.cuda.synchronize()
            ts = []
            for _ in range(200):
                t0 = time.perf_counter()
                layer(x)
                ts.append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
            ts.sort()
            print(f"== {spec} m={m} grad={grad}: host us per call median {statistics.median(ts):.1f} "
                  f"p90 {ts[180]:.1f} max {ts[-1]:.1f} min {ts[0]:.1f}", flush=True)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(30):
                    layer(x)
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=48),
                  flush=True)
    del layer, x
    torch.cuda.empty_cache()
