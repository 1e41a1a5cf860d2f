"""Where a low-density BlockSparseLinear backward's time goes at module level: the bench's eager
time (sparsekern.bench.time_ms of torch.autograd.grad for x and the weight), the sum of its kernels
(torch profiler), and the host time per call (perf_counter over 50 calls issued back to back, then
one synchronize: the GPU work must keep up for this to be the host's own cost). Also runs one
backward under torch.cuda.set_sync_debug_mode("warn"): any host synchronisation prints a warning.
8192 × 4096 → 4096, bf16, blocks of 64 and 128, d = 0.05 and 0.1 (BWD_CELLS=b:d,...)."""
import os, time, warnings, torch
import sparsekern
from sparsekern.bench import time_ms
from torch.profiler import profile, ProfilerActivity

dev = torch.device("cuda")
cells = [tuple(float(v) for v in c.split(":")) for c in os.environ.get("BWD_CELLS", "64:0.05,64:0.1,128:0.05,128:0.1").split(",")]
x = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16, requires_grad=True)
go = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16)
for b, d in cells:
    layer = sparsekern.BlockSparseLinear(4096, 4096, density=d, block_size=int(b), device=dev, dtype=torch.bfloat16)
    y = layer(x)
    fn = lambda: torch.autograd.grad(y, (x, layer.weight), go, retain_graph=True)
    t_eager = time_ms(fn, dev) * 1e3
    fn(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    kern = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            kern[e.name[:40]] = kern.get(e.name[:40], 0) + e.device_time_total / 10
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(50):
        fn()
    t_host = (time.perf_counter() - t0) / 50 * 1e6
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        fn()
        torch.cuda.set_sync_debug_mode("default")
    syncs = [str(m.message)[:80] for m in w if "synchroniz" in str(m.message).lower()]
    print(f"b={int(b)} d={d}: eager {t_eager:.1f} us, kernels {sum(kern.values()):.1f} us, host {t_host:.1f} us/call, "
          f"syncs {len(syncs)} {syncs[:1]}", flush=True)
    print("   " + "; ".join(f"{k} {v:.1f}" for k, v in sorted(kern.items(), key=lambda kv: -kv[1])), flush=True)
    del layer, y
