"""Shared fixtures: one test body for CPU and CUDA through the `device` fixture."""
from __future__ import annotations

import pytest
import torch

import sparsekern

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
