"""Kernel time of a linear layer's forward (bsr dds: X · Wᵀ + bias) and input gradient (dY · W) with
W block-sparse, every kernel launched summed (the dense path's memset, block scatter, bias fill and
cuBLAS product included), against dense F.linear. SPARSEKERN_BSR_DDS_DENSE (auto / 0 / 1) is read
once per process: run this once per mode and compare. Arguments: dtypes (bfloat16, float16, tf32);
environment: DDS_SHAPES=KxN,... (default 4096x4096), DDS_ROWS=8192,... (rows of X), DDS_BLOCKS
(default 16,32,64,128), DDS_DENSITIES (default 0.05,0.1,0.25,0.5,0.75)."""
import os, sys, torch
import torch.nn.functional as F
import sparsekern
from kernel_time import kernel_us  # tools/diag/kernel_time.py

dev = torch.device("cuda")
mode = os.environ.get("SPARSEKERN_BSR_DDS_DENSE", "auto")


if "tf32" in sys.argv[1:]:
    torch.backends.cuda.matmul.allow_tf32 = True
names = sys.argv[1:] or ["bfloat16"]
shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("DDS_SHAPES", "4096x4096").split(",")]
row_counts = [int(v) for v in os.environ.get("DDS_ROWS", "8192").split(",")]
blocks = [int(v) for v in os.environ.get("DDS_BLOCKS", "16,32,64,128").split(",")]
densities = [float(v) for v in os.environ.get("DDS_DENSITIES", "0.05,0.1,0.25,0.5,0.75").split(",")]
for name in names:
    dtype = torch.float32 if name == "tf32" else getattr(torch, name)
    for (k_in, n_out), m in [(s, r) for s in shapes for r in row_counts]:
        x = torch.randn(m, k_in, device=dev, dtype=dtype)
        dy = torch.randn(m, n_out, device=dev, dtype=dtype)
        bias = torch.randn(n_out, device=dev, dtype=dtype)
        wd = torch.randn(n_out, k_in, device=dev, dtype=dtype)
        t_dense = kernel_us(lambda: F.linear(x, wd, bias))
        for b in blocks:
            for d in densities:
                w = sparsekern.BlockSparseMatrix.random((n_out, k_in), b, d, dtype=dtype, device=dev)
                t_fwd = kernel_us(lambda: sparsekern.bsr.dds(x, w.t(), bias))
                t_dx = kernel_us(lambda: sparsekern.bsr.dds(dy, w))
                w64 = w.to_dense().double()
                e_fwd = ((sparsekern.bsr.dds(x, w.t(), bias).double() - (x.double() @ w64.t() + bias.double())).abs().max()
                         / (x.double() @ w64.t()).abs().max()).item()
                print(f"mode={mode} {name} m={m} {k_in}x{n_out} b={b} d={d}: fwd {t_fwd:.1f} us dx {t_dx:.1f} us "
                      f"dense {t_dense:.1f} us E {d * t_dense / t_fwd:.3f} err {e_fwd:.2e}", flush=True)
                del w, w64
        del x, dy, wd
