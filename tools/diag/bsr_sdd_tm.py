"""Kernel time of the tf32 sdd with blocks of 128 on the sm_90a kernel (K-major operands given, so
no copies: a = dYᵀ row-major, b = X column-major; over 8192 rows), under SPARSEKERN_BSR_SDD_TM
(64: 64-row tiles, 128: whole blocks; read once per process, so run once per value), the dense path
off. Also the weight gradient as BlockSparseLinear's backward calls it (dY and X row-major: the
copies, where they pay, plus the kernel). Environment: SDD_SHAPES (default 4096x4096,768x3072,
3072x768), SDD_DENSITIES (default 0.05,0.1,0.25,0.5,0.75)."""
import os, torch
import sparsekern
from kernel_time import kernel_us  # tools/diag/kernel_time.py

torch.backends.cuda.matmul.allow_tf32 = True
dev = torch.device("cuda")
tm = os.environ.get("SPARSEKERN_BSR_SDD_TM", "auto")
shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("SDD_SHAPES", "4096x4096,768x3072,3072x768").split(",")]
densities = [float(v) for v in os.environ.get("SDD_DENSITIES", "0.05,0.1,0.25,0.5,0.75").split(",")]
for k_in, n_out in shapes:
    x = torch.randn(8192, k_in, device=dev)
    dy = torch.randn(8192, n_out, device=dev)
    a_k = dy.t().contiguous()          # n_out × 8192, row-major: K-major
    b_k = x.t().contiguous().t()       # 8192 × k_in, column-major: K-major
    ref = dy.double().t() @ x.double()
    for d in densities:
        w = sparsekern.BlockSparseMatrix.random((n_out, k_in), 128, d, device=dev)
        t_k = kernel_us(lambda: sparsekern.bsr.sdd(a_k, b_k, w))
        t_bwd = kernel_us(lambda: sparsekern.bsr.sdd(dy.t(), x, w))
        got = sparsekern.bsr.sdd(a_k, b_k, w).to_dense().double()
        mask = w.mask().repeat_interleave(128, 0).repeat_interleave(128, 1).to(dev)
        err = ((got - ref * mask).abs().max() / ref.abs().max()).item()
        print(f"tm={tm} {k_in}x{n_out} b=128 d={d} nnz={w.nnz_blocks}: kernel {t_k:.1f} us, as the backward calls it "
              f"{t_bwd:.1f} us, err {err:.1e}", flush=True)
        del w, got, mask
