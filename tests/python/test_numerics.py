"""Accuracy against torch's own ops on the same inputs, measured against float64 (session 30's
audit of the CPU kernels found results 6-400x less accurate than torch's in these cases)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import sparsekern as sk
from sparsekern.testing import rel_error


def _ratio(ours, theirs, ref):
    """Our relative error over torch's (floored, so that two near-exact results compare equal)."""
    floor = 1e-9
    return (rel_error(ours, ref) + floor) / (rel_error(theirs, ref) + floor)


@pytest.mark.skipif(not hasattr(F, "rms_norm"), reason="torch without F.rms_norm")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("scale", [1.0, 0.1, 0.03])
def test_rms_norm_default_eps_is_torchs(dtype, scale):
    """eps=None took finfo(bf16).eps = 7.8e-3 where torch takes fp32's: rows of RMS 0.03 came out
    67% off torch's result in bf16."""
    torch.manual_seed(0)
    x = (torch.randn(8, 512) * scale).to(dtype)
    theirs = F.rms_norm(x, (512,))
    ours = sk.inplace_rms_norm(x.clone(), (512,))
    ref = F.rms_norm(x.double(), (512,), eps=torch.finfo(torch.float32).eps if dtype != torch.float64 else None)
    assert _ratio(ours, theirs, ref) <= 1.5


def test_fp32_products_with_long_reductions():
    """One fp32 running sum over all of K (the CPU GEMM; csr_sddmm's dot products) was 6-14x less
    accurate than torch at K = 16384 on positive data, where rounding errors do not cancel."""
    torch.manual_seed(1)
    k = 16384
    a, b = torch.rand(64, k), torch.rand(k, 64)
    ref = a.double() @ b.double()
    assert _ratio(sk.matmul(a, b), a @ b, ref) <= 3
    pattern = torch.ones(64, 64).to_sparse_csr()
    ours = sk.csr_sddmm(a, b, pattern).values()
    assert _ratio(ours, (a @ b).flatten(), ref.flatten()) <= 3
    # The block-sparse products sum 256 of k per fresh chunk as the GEMM does (one running sum
    # over a column's blocks was 3.3x / 2.4x / 1.7x torch's error at b = 16 / 32 / 64).
    for bs in (16, 32, 64):
        s = sk.BlockSparseMatrix.from_dense(b.T.contiguous(), bs, torch.ones(64 // bs, k // bs, dtype=torch.bool))
        assert _ratio(sk.bsr.dds(a, s.t()), a @ b, ref) <= 1.5, bs
        assert _ratio(sk.bsr.dsd(s, a.T.contiguous()).T, a @ b, ref) <= 1.5, bs


def test_block_sparse_bias_gradient_fp32():
    """The bias gradient (the rows of ∂ℓ/∂y summed on the CPU) was one fp32 running sum: 14x less
    accurate than torch's g.sum(0) at 4096 rows."""
    torch.manual_seed(2)
    layer = sk.BlockSparseLinear(64, 64, density=0.5, block_size=16)
    x = torch.randn(4096, 64)
    g = torch.rand(4096, 64)  # positive: the sum's rounding errors add up
    layer(x).backward(g)
    assert _ratio(layer.bias.grad, g.sum(0), g.double().sum(0)) <= 2


@pytest.mark.parametrize("dtype, big", [(torch.float32, 1e20), (torch.bfloat16, 1e30)])
def test_layer_norm_of_a_row_whose_square_overflows(dtype, big):
    """(x − mean)² was formed in fp32: its overflow gave rstd = 0 and a row of zeros (the bias).
    Normalised, the row is ±1 (torch gives NaN)."""
    x = torch.tensor([[big, -big] * 8], dtype=dtype)
    sk.inplace_layer_norm(x, (16,))
    assert torch.equal(x.float(), torch.tensor([[1.0, -1.0] * 8]))
