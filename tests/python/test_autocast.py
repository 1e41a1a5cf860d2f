"""Under torch.autocast the products and layers follow torch's policy for matmul-like ops (F.linear,
torch.matmul): floating operands other than fp64 are cast to the autocast dtype, the result is in
that dtype, and gradients reach fp32 parameters in fp32. Mixed-precision training wraps the
forward in autocast with fp32 parameters, so an activation arrives in bf16 (after an autocast
nn.Linear) or in fp32 (after a layer norm): both must work, as with nn.Linear, instead of raising
on the mixed dtypes. Each case compares with the same layer's own product in the autocast dtype
(parameters cast by hand, no autocast) and with float64.
"""
from __future__ import annotations

import math

import pytest
import torch

import sparsekern as sk
from sparsekern.kron import kron_reference
from sparsekern.testing import rel_error


def _dtype(device):
    return torch.bfloat16 if device.type == "cpu" else torch.float16


def _layers(device):
    torch.manual_seed(0)
    return [
        ("BlockSparseLinear", sk.BlockSparseLinear(256, 128, density=0.5, block_size=32, device=device)),
        ("KronLinear", sk.KronLinear([(16, 8), (16, 16)], device=device)),
        ("SparseLinear", sk.SparseLinear(256, 128, density=0.2, device=device)),
        ("SemiStructuredLinear", sk.SemiStructuredLinear(256, 128, device=device)),
    ]


def _dense_weight(name, layer):
    """(W (out × in), b) in float64: what the layer computes, x·Wᵀ + b."""
    if name == "BlockSparseLinear":
        lin = layer.to_dense_linear()
        return lin.weight.detach().double(), lin.bias.detach().double()
    if name == "KronLinear":
        return layer.weight.detach().double(), layer.bias.detach().double()
    if name == "SparseLinear":
        w = torch.sparse_csr_tensor(layer.crow_indices.long(), layer.col_indices.long(), layer.values.detach(),
                                    (layer.out_features, layer.in_features)).to_dense()
        return w.double(), layer.bias.detach().double()
    return (layer.weight * layer.mask).detach().double(), layer.bias.detach().double()


@pytest.mark.parametrize("index", range(4), ids=["BlockSparseLinear", "KronLinear", "SparseLinear",
                                                 "SemiStructuredLinear"])
@pytest.mark.parametrize("activation", ["half", "fp32"])
def test_layer_under_autocast(device, index, activation):
    name, layer = _layers(device)[index]
    dt = _dtype(device)
    x = torch.randn(33, 256, device=device)
    xin = (x.to(dt) if activation == "half" else x).requires_grad_()
    with torch.autocast(device.type, dtype=dt):
        y = layer(xin)
    assert y.dtype == dt, f"{name}: output {y.dtype} under autocast({dt})"
    y.float().square().sum().backward()
    params = [p for p in layer.parameters() if p.requires_grad]
    assert params and all(p.grad is not None and p.grad.dtype == torch.float32 for p in params)
    assert xin.grad is not None and xin.grad.dtype == xin.dtype
    w, b = _dense_weight(name, layer)
    ref = x.to(dt).double() @ w.t() + b
    assert rel_error(y, ref) <= 3e-2
    # Without autocast the fp32 layer still refuses a half activation, naming the argument.
    if activation == "half":
        with pytest.raises(TypeError, match="dtype"):
            layer(xin.detach())


def test_products_under_autocast(device):
    dt = _dtype(device)
    torch.manual_seed(1)
    a, b = torch.randn(4, 40, 64, device=device), torch.randn(64, 24, device=device)
    fs = [torch.randn(8, 6, device=device), torch.randn(8, 4, device=device)]
    s = sk.BlockSparseMatrix.random((64, 96), 16, 0.5, device=device)
    with torch.autocast(device.type, dtype=dt):
        y1 = sk.matmul(a.to(dt), b)                 # one half, one fp32 operand
        y2 = sk.matmul_transb(a, b.t().contiguous())  # both fp32
        y3 = sk.kron_matmul(a.reshape(-1, 64), fs)
        y4 = sk.bsr.dds(a[0], s)
        y5 = sk.bsr.dsd(s.t(), a[0].t().contiguous())
        y6 = sk.bsr.sdd(a[0].t().contiguous(), a[1], sk.BlockSparseMatrix.random((64, 64), 16, 0.5, device=device))
        y64 = sk.matmul(a.double(), b.double())    # fp64 is left alone, as autocast does
    for y in (y1, y2, y3, y4, y5):
        assert y.dtype == dt
    assert y6.dtype == dt and y64.dtype == torch.float64
    ad, bd = a.to(dt).double(), b.to(dt).double()
    assert rel_error(y1, ad @ bd) <= 3e-2 and rel_error(y2, ad @ bd) <= 3e-2
    assert rel_error(y3, kron_reference(ad.reshape(-1, 64), [f.to(dt).double() for f in fs])) <= 3e-2
    sd = s.to_dense().to(dt).double()
    assert rel_error(y4, ad[0] @ sd) <= 3e-2 and rel_error(y5, sd.t() @ ad[0].t()) <= 3e-2
    assert math.isfinite(float(y6.to_dense().float().sum()))


def test_half_semi_layer_under_autocast(device):
    """A SemiStructuredLinear already in the autocast dtype keeps its 2:4 path under autocast (only x
    is cast; an fp32 layer runs the dense masked product there, see its forward), and an fp32 bias
    is added after the product instead of fused."""
    dt = _dtype(device)
    torch.manual_seed(2)
    layer = sk.SemiStructuredLinear(256, 128, device=device, dtype=dt)
    x = torch.randn(40, 256, device=device)
    with torch.autocast(device.type, dtype=dt):
        y = layer(x)
        layer.bias.data = layer.bias.data.float()
        y2 = layer(x)
    assert y.dtype == dt and y2.dtype == dt
    w = (layer.weight * layer.mask).detach().double()
    ref = x.to(dt).double() @ w.t() + layer.bias.detach().double()
    assert rel_error(y, ref) <= 3e-2 and rel_error(y2, ref) <= 3e-2
