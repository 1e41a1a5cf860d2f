"""Arrays from any DLPack producer reach the native module: torch tensors passed directly (through
their __dlpack__ protocol, not our capsule fast path) and CuPy arrays. Each probe runs in a
subprocess so that a crash in a producer's DLPack export fails the test instead of the run."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest



def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("dev", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_torch_tensors_through_dunder_dlpack(dev):
    r = _run(f"""
        import torch, sparsekern
        from sparsekern import _C
        a = torch.randn(5, 7, device="{dev}", dtype=torch.float64)
        b = torch.randn(7, 3, device="{dev}", dtype=torch.float64)
        out = torch.full((5, 3), float("nan"), device="{dev}", dtype=torch.float64)
        s = torch.cuda.current_stream().cuda_stream if "{dev}" == "cuda" else 0
        _C.gemm(a, b, out, stream=s)
        assert torch.allclose(out, a @ b), (out, a @ b)
        print("ok")
    """)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.cuda
def test_cupy_arrays():
    pytest.importorskip("cupy")
    r = _run("""
        import cupy as cp, numpy as np, sparsekern
        from sparsekern import _C
        a = cp.random.standard_normal((64, 33), dtype=cp.float32)
        b = cp.random.standard_normal((33, 17), dtype=cp.float32)
        out = cp.full((64, 17), cp.nan, dtype=cp.float32)
        _C.gemm(a, b, out, stream=cp.cuda.get_current_stream().ptr)
        ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b).astype(np.float64)
        err = np.linalg.norm(cp.asnumpy(out) - ref) / np.linalg.norm(ref)
        assert err < 1e-5, err
        print("ok", err)
    """)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
