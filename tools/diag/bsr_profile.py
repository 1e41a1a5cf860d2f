"""Kernel-level times of BlockSparseLinear forward/backward (torch profiler), with E against dense.
BSR_PROFILE_BLOCKS=32,64 (default 32,64,128) narrows the block sizes; BSR_PROFILE_SHAPES=KxN,...
(default 4096x4096; M = 8192) and BSR_PROFILE_DENSITIES=0.1,0.5 (default 0.05,0.1,0.25,0.5) pick
the layers; BSR_PROFILE_KERNELS=1 prints each kernel's time."""
import os, sys, time, torch
import torch.nn.functional as F
import sparsekern
from graphtime import kernel_times

dev = torch.device("cuda")


def kernels(fn, reps=10):
    return kernel_times(fn, reps, 48)


def fmt(ks):
    return "; ".join(f"{k} {v:.1f}" for k, v in sorted(ks.items(), key=lambda kv: -kv[1]))


# Arguments: torch dtype names, or "tf32" (float32 with TF32 allowed, for dense and ours alike).
if "tf32" in sys.argv[1:]:
    torch.backends.cuda.matmul.allow_tf32 = True
dtypes = [torch.bfloat16] if len(sys.argv) < 2 else [torch.float32 if a == "tf32" else getattr(torch, a)
                                                     for a in sys.argv[1:]]
shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("BSR_PROFILE_SHAPES", "4096x4096").split(",")]
densities = [float(v) for v in os.environ.get("BSR_PROFILE_DENSITIES", "0.05,0.1,0.25,0.5").split(",")]
for dtype, (k_in, n_out) in [(dt, s) for dt in dtypes for s in shapes]:
    x = torch.randn(8192, k_in, device=dev, dtype=dtype)
    w = torch.randn(n_out, k_in, device=dev, dtype=dtype)
    t_dense = sum(kernels(lambda: F.linear(x, w)).values())
    print(f"{dtype} {k_in}->{n_out} dense F.linear kernel {t_dense:.1f} us", flush=True)
    for b in [int(v) for v in os.environ.get("BSR_PROFILE_BLOCKS", "32,64,128").split(",")]:
        for d in densities:
            layer = sparsekern.BlockSparseLinear(k_in, n_out, density=d, block_size=b, device=dev, dtype=dtype)
            with torch.no_grad():
                kf = kernels(lambda: layer(x))
            xg = x.clone().requires_grad_()
            y = layer(xg)
            go = torch.randn_like(y)
            kb = kernels(lambda: torch.autograd.grad(y, (xg, layer.weight), go, retain_graph=True))
            tf, tb = sum(kf.values()), sum(kb.values())
            tail = f" | fwd: {fmt(kf)} | bwd: {fmt(kb)}" if os.environ.get("BSR_PROFILE_KERNELS") == "1" else ""
            print(f"b={b} d={d}: fwd {tf:.1f} us E={d * t_dense / tf:.2f} | bwd {tb:.1f} us (bwd/2)/fwd={tb / 2 / tf:.2f}"
                  + tail, flush=True)
            del layer, xg, y, go
