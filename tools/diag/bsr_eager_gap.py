"""Why a BlockSparseLinear forward's eager time (sparsekern.bench.time_ms: CUDA events around each
call) exceeds its device time at low density (the bsr bench, session 40 on an H200: 8192 × 3072 →
768, b = 128, d = 0.1, bf16: 119.8 µs eager against 16.0 µs in a CUDA graph). For a few cells:
the host µs per call (unsynchronised loop), time_ms, back-to-back bursts, the graph time, and a
torch.profiler count of the CUDA runtime calls per module call (a synchronising call would show as
cudaStreamSynchronize / cudaDeviceSynchronize / cudaEventSynchronize / cudaMemcpy...).
Usage: python bsr_eager_gap.py [M,K,N,BLOCK,DENSITY,DTYPE ...] [--graph-profile]
--graph-profile: also the device activities of one replay of a 20-call graph, with their times."""
from __future__ import annotations

import sys
from collections import Counter

import torch
from diag_timing import burst_ms, host_us_per_call  # this folder

import sparsekern
from sparsekern.bench import graph_time_ms, time_ms
from sparsekern.testing import capture_graph

dev = torch.device("cuda")
cells = [a for a in sys.argv[1:] if not a.startswith("--")] or ["8192,3072,768,128,0.1,bfloat16", "8192,4096,4096,128,0.05,bfloat16",
                         "8192,4096,4096,128,0.25,bfloat16"]
for c in cells:
    m, k, n, b, d, dt = c.split(",")
    m, k, n, b, d, dt = int(m), int(k), int(n), int(b), float(d), getattr(torch, dt)
    torch.manual_seed(0)
    layer = sparsekern.BlockSparseLinear(k, n, density=d, block_size=b, device=dev, dtype=dt)
    x = torch.randn(m, k, device=dev, dtype=dt)
    lin = torch.nn.Linear(k, n, device=dev, dtype=dt)
    for name, fn in [("ours", lambda: layer(x)), ("dense", lambda: lin(x))]:
        host = host_us_per_call(fn, torch.cuda.synchronize, calls=200, repeats=5, warmup=20)
        with torch.no_grad():
            host_ng = host_us_per_call(fn, torch.cuda.synchronize, calls=200, repeats=5, warmup=20)
        t = time_ms(fn, dev) * 1e3
        burst = burst_ms(fn) * 1e3
        g = graph_time_ms(fn, dev) * 1e3
        g1 = graph_time_ms(fn, dev, calls=1) * 1e3
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
        api = Counter()
        kern = Counter()
        for e in prof.events():
            nm = e.name
            if nm.startswith("cuda") or nm.startswith("cu"):
                if e.device_type == torch.autograd.DeviceType.CPU:
                    api[nm] += 1
            elif e.device_type == torch.autograd.DeviceType.CUDA:
                kern[nm[:60]] += 1
        print(f"{c} {name}: host {host:.1f} us/call (no grad {host_ng:.1f}), time_ms {t:.1f}, burst {burst:.1f}, "
              f"graph {g:.1f} us (1 call per graph: {g1:.1f})", flush=True)
        print("   runtime calls per 10 calls:", dict(api.most_common(12)))
        print("   device activities per 10 calls:", dict(kern.most_common(6)))
        if "--graph-profile" in sys.argv:  # the kernels of one replay of a 20-call graph, with their µs
            # (a capture stream of its own, without the per-stream caches' buffers: as torch.cuda.graph's)
            graph, _ = capture_graph(lambda: [fn() for _ in range(20)])
            graph.replay()
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as gp:
                graph.replay()
                torch.cuda.synchronize()
            ks = [(e.name[:50], e.device_time) for e in gp.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            print(f"   one replay of 20 calls: {len(ks)} activities, µs each:",
                  [round(t, 1) for _, t in ks][:24], "names:", sorted({n for n, _ in ks}))
