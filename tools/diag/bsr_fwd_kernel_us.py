"""Kernel µs of one BlockSparseLinear forward (no grad), 8192 x 4096 -> 4096, per (block, density,
dtype) of argv ("32:0.1,0.25 64:0.1" and a dtype list "bfloat16,float16"): the summed device time of
the call's kernels (kernel_time.kernel_us), one line each. Run under SPARSEKERN_BSR_GROUPED=0 / 1 in
separate processes to price the grouped dds against the one-column one (the switch is read once).
TF32=1: float32 layers run with TF32 allowed (torch.backends.cuda.matmul.allow_tf32)."""
import os
import sys

import torch

import sparsekern
from kernel_time import kernel_us

dev = torch.device("cuda")
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = os.environ.get("TF32") == "1"
mode = os.environ.get("SPARSEKERN_BSR_GROUPED", "auto")
for dt_name in sys.argv[2].split(","):
    dt = getattr(torch, dt_name)
    x = torch.randn(8192, 4096, device=dev, dtype=dt)
    for spec in sys.argv[1].split():
        b, ds = spec.split(":")
        for d in ds.split(","):
            layer = sparsekern.BlockSparseLinear(4096, 4096, density=float(d), block_size=int(b), device=dev, dtype=dt)
            with torch.no_grad():
                us = kernel_us(lambda: layer(x), reps=20)
            print(f"grouped={mode} {dt_name}{' tf32' if torch.backends.cuda.matmul.allow_tf32 else ''} b={b} d={d}: {us:.1f} us", flush=True)
