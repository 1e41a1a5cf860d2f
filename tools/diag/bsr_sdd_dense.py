"""Kernel time of a linear layer's weight gradient (bsr sdd: dYᵀ · X on the weight's pattern, every
kernel it launches summed: copies, cuBLAS, block gather) and of the dense product dYᵀ · X, per dtype,
block size and density. SPARSEKERN_BSR_SDD_DENSE (auto / 0 / 1) is read once per process, so run this
once per mode and compare the lines. Arguments: dtypes (bfloat16, float16, tf32); environment:
SDD_SHAPES=KxN,... (default 4096x4096; M = 8192 rows), SDD_BLOCKS (default 16,32,64,128),
SDD_DENSITIES (default 0.05,0.1,0.25,0.5,0.75). Each line: mode dtype shape b d kernel-µs, the
dense product's µs, and the max error against the dense product (float64) on the pattern."""
import os, sys, torch
import sparsekern
from kernel_time import kernel_us  # tools/diag/kernel_time.py

dev = torch.device("cuda")
mode = os.environ.get("SPARSEKERN_BSR_SDD_DENSE", "auto")


if "tf32" in sys.argv[1:]:
    torch.backends.cuda.matmul.allow_tf32 = True
names = sys.argv[1:] or ["bfloat16"]
shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("SDD_SHAPES", "4096x4096").split(",")]
blocks = [int(v) for v in os.environ.get("SDD_BLOCKS", "16,32,64,128").split(",")]
densities = [float(v) for v in os.environ.get("SDD_DENSITIES", "0.05,0.1,0.25,0.5,0.75").split(",")]
for name in names:
    dtype = torch.float32 if name == "tf32" else getattr(torch, name)
    for k_in, n_out in shapes:
        x = torch.randn(8192, k_in, device=dev, dtype=dtype)
        dy = torch.randn(8192, n_out, device=dev, dtype=dtype)
        t_dense = kernel_us(lambda: dy.t() @ x)
        ref = (dy.double().t() @ x.double())
        for b in blocks:
            for d in densities:
                w = sparsekern.BlockSparseMatrix.random((n_out, k_in), b, d, dtype=dtype, device=dev)
                t = kernel_us(lambda: sparsekern.bsr.sdd(dy.t(), x, w))
                got = sparsekern.bsr.sdd(dy.t(), x, w).to_dense().double()
                mask = w.mask().repeat_interleave(b, 0).repeat_interleave(b, 1).to(dev)
                err = ((got - ref * mask).abs().max() / ref.abs().max()).item()
                print(f"mode={mode} {name} {k_in}x{n_out} b={b} d={d}: sdd {t:.1f} us dense {t_dense:.1f} us "
                      f"ratio {t / t_dense:.2f} err {err:.2e}", flush=True)
                del w, got, mask
        del x, dy, ref
