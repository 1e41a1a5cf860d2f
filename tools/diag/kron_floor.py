"""How close to the issue-5 roofline a kernel that only copies could come, per bench case with batch
>= 1024: device time (CUDA graph of 50 calls, sparsekern.bench.graph_time_ms) of copying x into a
tensor of y's size (the least memory traffic any forward has: read x once, write y once), against
the roofline max(FLOPs / fp32 peak, bytes / copy bandwidth) with the ceilings the bench measures
(a large GEMM and a 256 MB copy). A forward cannot beat the copy of its own bytes, so
roofline / copy time bounds the % of the roofline it can reach. fp32, TF32 off."""
import math

import torch

from sparsekern.bench import graph_time_ms
from sparsekern.bench.kron import _ceilings

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
ceil = _ceilings(dev)
print(f"ceilings: fp32 {ceil['fp32_tflops']:.1f} TFLOP/s, copy {ceil['copy_tbps']:.2f} TB/s")
for batch, sizes in [(1024, [32, 32]), (1024, [64, 64]), (1024, [128, 128]), (1024, [16, 16, 16]),
                     (1024, [8, 8, 8, 8]), (4096, [64, 64])]:
    n = math.prod(sizes)
    x = torch.randn(batch, n, device=dev)
    y = torch.empty_like(x)
    flops = 2 * batch * n * sum(sizes)
    nbytes = 2 * x.numel() * 4
    roof_us = max(flops / (ceil["fp32_tflops"] * 1e12), nbytes / (ceil["copy_tbps"] * 1e12)) * 1e6
    t = graph_time_ms(lambda: y.copy_(x), dev, calls=50) * 1e3
    print(f"{batch}x{sizes}: roofline {roof_us:6.1f} us, copy of x -> y {t:6.1f} us "
          f"({nbytes / t / 1e6:.2f} TB/s): at most {100 * roof_us / t:5.1f}% of the roofline", flush=True)
