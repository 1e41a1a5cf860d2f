"""Device time of a linear layer's bias gradient (the column sums of dY, M × N) three ways: torch's
reduction (grad.sum(0), what the bsr backward uses), a 1-row cuBLAS GEMM (ones(1, M) @ dY) and a
cuBLAS GEMV (mv(dY.t(), ones)); each checked against a float64 sum.

Usage: python tools/diag/bias_grad.py
"""
import torch

from sparsekern.bench import graph_time_ms

dev = torch.device("cuda")
for dtype in (torch.bfloat16, torch.float16, torch.float32):
    for m, n in ((8192, 4096), (8192, 768), (8192, 3072)):
        g = torch.randn(m, n, device=dev, dtype=dtype)
        ones_row = torch.ones(1, m, device=dev, dtype=dtype)
        ones = torch.ones(m, device=dev, dtype=dtype)
        ref = g.double().sum(0)
        row = []
        for name, f in (("sum", lambda: g.sum(0)), ("gemm", lambda: (ones_row @ g)[0]),
                        ("gemv", lambda: torch.mv(g.t(), ones))):
            err = ((f().double() - ref).norm() / ref.norm()).item()
            row.append(f"{name} {1e3 * graph_time_ms(f, dev):6.1f} us (err {err:.1e})")
        gb = m * n * g.element_size() / 1e9
        print(f"{str(dtype)[6:]:8s} {m}x{n} ({gb * 1e3:.0f} MB): " + " | ".join(row), flush=True)
