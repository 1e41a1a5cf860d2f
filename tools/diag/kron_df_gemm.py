"""The ∂ℓ/∂F GEMM of kron's step-wise backward (p × q output, contraction over `rows` ~ 10⁵-10⁶)
in several formulations, fp32 with TF32 off, device time per call (CUDA graph replay) and the
kernels cuBLAS picked: which one to use in kron._grad_factor. Shapes: the steps-backward cases of
issue 5's table. `state` is (rows, p) and `h` is (q, rows), both contiguous, as in the backward.
"""
import torch
from torch.profiler import ProfilerActivity, profile

from sparsekern.bench import graph_time_ms

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False


def kernels(fn):
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return ", ".join(sorted({e.key[:46] for e in prof.key_averages() if e.device_time_total > 0}))


def split_bmm(s, h, b):
    rows, p = s.shape
    c = rows // b
    return torch.bmm(s.view(b, c, p).mT, h.view(h.shape[0], b, c).permute(1, 2, 0)).sum(0)


def split_mm(s, h, b):
    rows = s.shape[0]
    c = rows // b
    out = torch.mm(s[:c].mT, h[:, :c].mT)
    for i in range(1, b):
        out.addmm_(s[i * c:(i + 1) * c].mT, h[:, i * c:(i + 1) * c].mT)
    return out


for rows, p, q, case in ((262144, 64, 64, "4096x[64,64]"), (65536, 64, 64, "1024x[64,64]"),
                         (131072, 32, 32, "128x[32,32,32]")):
    s = torch.randn(rows, p, device=dev)
    h = torch.randn(q, rows, device=dev)
    ref = (s.double().mT @ h.double().mT)
    variants = {
        "mm(s.mT, h.mT)": lambda: torch.mm(s.mT, h.mT),
        "mm(h, s).mT": lambda: torch.mm(h, s).mT,
        "bmm split 8": lambda: split_bmm(s, h, 8),
        "bmm split 32": lambda: split_bmm(s, h, 32),
        "mm+addmm split 4": lambda: split_mm(s, h, 4),
        "mm+addmm split 16": lambda: split_mm(s, h, 16),
    }
    print(f"--- {case}: state ({rows}, {p}), h ({q}, {rows}); {2 * rows * p * q / 1e9:.2f} GFLOP", flush=True)
    for name, fn in variants.items():
        t = graph_time_ms(fn, dev) * 1e3
        err = ((fn().double() - ref).norm() / ref.norm()).item()
        print(f"  {name:20s} {t:8.1f} µs  {2 * rows * p * q / t / 1e6:6.1f} TFLOP/s  err {err:.1e} | {kernels(fn)}",
              flush=True)
