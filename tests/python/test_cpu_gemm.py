"""The CPU GEMM behind the dense products, kron's GEMM steps and the block-sparse products
(src/common/cpu_gemm.h; bsr's dds through its accumulating form), with each micro-kernel this CPU
has: the baseline (SSE2 on x86-64, what machines without AVX2+FMA run), AVX2+FMA, AVX-512. The
kernel is picked once per process, so each runs in a subprocess with SPARSEKERN_CPU_GEMM set."""
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
        for m, k, n in [(1, 1, 1), (5, 3, 17), (37, 129, 33), (64, 64, 64), (4, 0, 9), (203, 70, 45)]:
            a, b = torch.randn(m, k, dtype=dt), torch.randn(k, n, dtype=dt)
            ref = a.double() @ b.double()
            err = ((dense.matmul(a, b).double() - ref).norm() / max(ref.norm(), 1e-30)).item() if ref.numel() else 0.0
            worst = max(worst, err / (1e-2 if dt is torch.bfloat16 else 1e-5))
        x = torch.randn(7, 130 * 3, dtype=dt)  # a factor > 64: kron's GEMM steps
        fs = [torch.randn(130, 67, dtype=dt), torch.randn(3, 5, dtype=dt)]
        ref = kron_reference(x.double(), [f.double() for f in fs])
        err = ((kron_matmul(x, fs).double() - ref).norm() / ref.norm()).item()
        worst = max(worst, err / (1e-2 if dt is torch.bfloat16 else 1e-5))
    for dt in (torch.float32, torch.float64, torch.bfloat16):
        tol = 1e-2 if dt is torch.bfloat16 else 1e-5
        for b in (16, 32):
            s = sparsekern.BlockSparseMatrix.random((3 * b, 5 * b), b, 0.4, dtype=dt)
            sd = s.to_dense().double()
            mask = s.mask().repeat_interleave(b, 0).repeat_interleave(b, 1).double()
            x, bias = torch.randn(203, 3 * b, dtype=dt), torch.randn(5 * b, dtype=dt)  # tiles of several row groups
            y, a, c = torch.randn(5 * b, 11, dtype=dt), torch.randn(3 * b, 29, dtype=dt), torch.randn(29, 5 * b, dtype=dt)
            for got, ref in ((sparsekern.bsr.dds(x, s, bias), x.double() @ sd + bias.double()),
                             (sparsekern.bsr.dds(y.t(), s.t()), y.t().double() @ sd.t()),
                             (sparsekern.bsr.dsd(s, y), sd @ y.double()),
                             (sparsekern.bsr.sdd(a, c, s).to_dense(), (a.double() @ c.double()) * mask)):
                err = ((got.double() - ref).norm() / ref.norm()).item()
                worst = max(worst, err / tol)
    print("worst/tol", worst)
    assert worst <= 1.0, worst
""")


@pytest.mark.parametrize("kernel", ["base", "avx2", "auto"])
def test_cpu_gemm_kernels(kernel):
    """Every micro-kernel up to the widest this CPU has (SPARSEKERN_CPU_GEMM caps the choice: on a
    CPU without AVX2 "avx2" runs the baseline, on one without AVX-512 "auto" runs AVX2)."""
    env = dict(os.environ)
    env.pop("SPARSEKERN_CPU_GEMM", None)
    if kernel != "auto":
        env["SPARSEKERN_CPU_GEMM"] = kernel
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "worst/tol" in r.stdout


def test_cpu_ops_follow_torch_threads():
    """The library's CPU ops run as many OpenMP threads as torch.get_num_threads() (its OpenMP runtime
    is not torch's, and keeps the team size per calling thread): after torch.set_num_threads, and in
    a thread started afterwards, whose runtime default would be one thread per core."""
    import threading

    import torch

    from sparsekern import _C, dense
    from sparsekern.kron import kron_matmul, kron_reference

    old = torch.get_num_threads()
    _C.set_cpu_threads(2)
    if _C.cpu_threads() != 2:
        pytest.skip("sparsekern built without OpenMP")
    x, fs = torch.randn(9, 64), [torch.randn(8, 8), torch.randn(8, 8)]
    want = kron_reference(x.double(), [f.double() for f in fs])
    try:
        for n in (1, 3, 2):
            torch.set_num_threads(n)
            got = kron_matmul(x, fs)
            assert _C.cpu_threads() == n
            torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(dense.matmul(x[:, :8], fs[0]), x[:, :8] @ fs[0], rtol=1e-5, atol=1e-5)
            assert _C.cpu_threads() == n
        torch.set_num_threads(1)
        seen = {}

        def run():
            got = kron_matmul(x, fs)
            seen["threads"] = _C.cpu_threads()
            seen["err"] = ((got.double() - want).norm() / want.norm()).item()

        t = threading.Thread(target=run)
        t.start()
        t.join()
        assert seen["threads"] == 1 and seen["err"] < 1e-5, seen
    finally:
        torch.set_num_threads(old)


def test_set_cpu_threads_rejects_zero():
    from sparsekern import _C

    with pytest.raises(ValueError, match="n must be at least 1"):
        _C.set_cpu_threads(0)
