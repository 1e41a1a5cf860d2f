"""The CPU GEMM behind the dense products and kron's GEMM steps (src/common/cpu_gemm.h): its
baseline micro-kernel too (SSE2 on x86-64), which machines without AVX2+FMA run. The kernel is
picked once per process, so the baseline runs in a subprocess with SPARSEKERN_CPU_GEMM=base."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import torch, sparsekern
    from sparsekern import dense
    from sparsekern.kron import kron_matmul, kron_reference
    torch.manual_seed(0)
    worst = 0.0
    for dt in (torch.float32, torch.float64, torch.bfloat16):
        for m, k, n in [(1, 1, 1), (5, 3, 17), (37, 129, 33), (64, 64, 64), (4, 0, 9)]:
            a, b = torch.randn(m, k, dtype=dt), torch.randn(k, n, dtype=dt)
            ref = a.double() @ b.double()
            err = ((dense.matmul(a, b).double() - ref).norm() / max(ref.norm(), 1e-30)).item() if ref.numel() else 0.0
            worst = max(worst, err / (1e-2 if dt is torch.bfloat16 else 1e-5))
        x = torch.randn(7, 130 * 3, dtype=dt)  # a factor > 64: kron's GEMM steps
        fs = [torch.randn(130, 67, dtype=dt), torch.randn(3, 5, dtype=dt)]
        ref = kron_reference(x.double(), [f.double() for f in fs])
        err = ((kron_matmul(x, fs).double() - ref).norm() / ref.norm()).item()
        worst = max(worst, err / (1e-2 if dt is torch.bfloat16 else 1e-5))
    print("worst/tol", worst)
    assert worst <= 1.0, worst
""")


@pytest.mark.parametrize("kernel", ["base", "auto"])
def test_cpu_gemm_kernels(kernel):
    env = dict(os.environ)
    env.pop("SPARSEKERN_CPU_GEMM", None)
    if kernel == "base":
        env["SPARSEKERN_CPU_GEMM"] = "base"
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "worst/tol" in r.stdout
