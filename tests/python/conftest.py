"""Shared fixtures: one test body for CPU and CUDA through the `device` fixture.

The CPU runs Kronecker products as GEMM steps unless SPARSEKERN_KRON_CPU=emulate, which runs the
fused GPU block programs' emulation instead: the suite sets it, so that its CPU cases check the GPU
kernels' arithmetic and tiling (tests of the GEMM-step plan set SPARSEKERN_KRON_CPU=gemm).
"""
from __future__ import annotations

import os

os.environ.setdefault("SPARSEKERN_KRON_CPU", "emulate")

import pytest  # noqa: E402
import torch  # noqa: E402

import sparsekern  # noqa: E402

CUDA_OK = torch.cuda.is_available() and sparsekern.cuda_available()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA device and a CUDA build of sparsekern")
    for item in items:
        if "cuda" in item.keywords and not CUDA_OK:
            item.add_marker(skip)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def device(request) -> torch.device:
    return torch.device(request.param)


@pytest.fixture(autouse=True)
def _seed(request):
    """Fixed seed per test id: fresh, reproducible random data in every case."""
    import zlib

    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))
    yield
    if CUDA_OK:
        # A test must leave no sticky CUDA error behind: this raises if one did.
        torch.cuda.synchronize()
