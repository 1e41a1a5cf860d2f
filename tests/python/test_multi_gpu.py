"""Operands on a GPU other than the current one (needs two GPUs; skipped otherwise).

Multi-GPU jobs hold layers on cuda:1, cuda:2, ... while torch's current device may still be cuda:0
(model parallelism, or a process that never calls torch.cuda.set_device). Every op must run on its
operands' device, on that device's current stream, with that device's cuBLAS / cuSPARSE handles,
workspaces and kernel attributes: a kernel launched on the current device instead reads another
GPU's pointers (an illegal address, or silently wrong results where peer access is on). Each test
runs its op with the operands on cuda:1 while cuda:0 is current (and the reverse), and compares with
the same op on the other GPU and with float64 on the CPU.
"""
from __future__ import annotations

import math

import pytest
import torch

import sparsekern as sk
from sparsekern import BlockSparseLinear, KronLinear
from sparsekern.kron import kron_reference
from sparsekern.testing import rel_error

pytestmark = pytest.mark.cuda


def _two_gpus():
    if not (torch.cuda.is_available() and sk.cuda_available() and torch.cuda.device_count() >= 2):
        pytest.skip("needs two CUDA devices and a CUDA build of sparsekern")


# (operand device, current device)
PAIRS = [(1, 0), (0, 1)]


def _on(dev_index):
    return torch.device("cuda", dev_index)


@pytest.mark.parametrize("dev,cur", PAIRS)
def test_dense(dev, cur):
    _two_gpus()
    torch.manual_seed(0)
    a = torch.randn(3, 200, 96, dtype=torch.float32)
    b = torch.randn(3, 96, 130, dtype=torch.float32)
    with torch.cuda.device(cur):
        ad, bd = a.to(_on(dev)).requires_grad_(), b.to(_on(dev)).requires_grad_()
        y = sk.matmul(ad, bd)
        ga, gb = torch.autograd.grad(y.square().sum(), [ad, bd])
        yt = sk.matmul_transb(ad, bd.mT)
        torch.cuda.synchronize(_on(dev))
    assert y.device == _on(dev) and ga.device == _on(dev)
    ref = a.double() @ b.double()
    assert rel_error(y, ref) <= 1e-5 and rel_error(yt, ref) <= 1e-5
    assert rel_error(ga, (2 * ref) @ b.double().mT) <= 1e-5
    assert rel_error(gb, a.double().mT @ (2 * ref)) <= 1e-5


# The kron kernels of the bench's plans: register-tile (two factors of 32), small-factor ((16)^3),
# the natural split ((32)^3: a head pass and strided-batched GEMMs), cuBLAS steps (128 x 128).
KRON = [(1024, [(32, 32)] * 2), (64, [(16, 16)] * 3), (8, [(32, 32)] * 3), (16, [(128, 128)] * 2)]


@pytest.mark.parametrize("dev,cur", PAIRS)
@pytest.mark.parametrize("batch,shapes", KRON)
def test_kron(dev, cur, batch, shapes):
    _two_gpus()
    torch.manual_seed(1)
    P, Q = math.prod(p for p, _ in shapes), math.prod(q for _, q in shapes)
    layer = KronLinear(shapes, dtype=torch.float32)
    x = torch.randn(batch, P)
    go = torch.randn(batch, Q)
    with torch.cuda.device(cur):
        ld = KronLinear(shapes, device=_on(dev), dtype=torch.float32)
        ld.load_state_dict(layer.state_dict())
        xd = x.to(_on(dev)).requires_grad_()
        y = ld(xd)
        grads = torch.autograd.grad(y, [xd, *ld.factors, ld.bias], go.to(_on(dev)))
        with torch.no_grad():
            y_nograd = ld(xd)
        torch.cuda.synchronize(_on(dev))
    x6 = x.double().requires_grad_()
    f6 = [f.detach().double().requires_grad_() for f in layer.factors]
    b6 = layer.bias.detach().double().requires_grad_()
    y6 = kron_reference(x6, f6) + b6
    want = torch.autograd.grad(y6, [x6, *f6, b6], go.double())
    assert rel_error(y, y6) <= 1e-5 and rel_error(y_nograd, y6) <= 1e-5
    for g, w in zip(grads, want):
        assert g.device == _on(dev) and rel_error(g, w) <= 1e-4


@pytest.mark.parametrize("dev,cur", PAIRS)
@pytest.mark.parametrize("dtype,block,density", [(torch.bfloat16, 64, 0.25), (torch.float16, 128, 0.1),
                                                 (torch.float32, 32, 0.5)])
def test_block_sparse_linear(dev, cur, dtype, block, density):
    """4096 rows: the sm_90a dds with its per-(device, stream) tile counter, the weight gradient's
    sdd, the bias gradient; fp32 runs the HMMA kernels."""
    _two_gpus()
    torch.manual_seed(2)
    with torch.cuda.device(cur):
        layer = BlockSparseLinear(512, 1024, density=density, block_size=block, device=_on(dev), dtype=dtype)
        x = torch.randn(4096, 512, device=_on(dev), dtype=dtype, requires_grad=True)
        go = torch.randn(4096, 1024, device=_on(dev), dtype=dtype)
        y = layer(x)
        gx, gw, gb = torch.autograd.grad(y, [x, layer.weight, layer.bias], go)
        torch.cuda.synchronize(_on(dev))
    w = layer.to_dense_linear().weight.detach().double().cpu()
    xd, god = x.detach().double().cpu(), go.double().cpu()
    tol = 2e-2 if dtype != torch.float32 else 1e-4
    assert rel_error(y.cpu(), xd @ w.t() + layer.bias.detach().double().cpu()) <= tol
    assert rel_error(gx.cpu(), god @ w) <= tol
    assert rel_error(gb.cpu(), god.sum(0)) <= tol
    rows, cols = layer.block_row_indices.long().cpu(), layer.block_col_indices.long().cpu()
    n, k = w.shape
    grid = (god.t() @ xd).reshape(n // block, block, k // block, block).permute(0, 2, 1, 3)
    assert rel_error(gw.cpu(), grid[rows, cols]) <= tol


@pytest.mark.parametrize("dev,cur", PAIRS)
def test_sparse_linear(dev, cur):
    """cuSPARSE SpMM / SDDMM through per-pattern plans (made per device and stream)."""
    _two_gpus()
    torch.manual_seed(3)
    lin = torch.nn.Linear(512, 256)
    with torch.cuda.device(cur):
        layer = sk.SparseLinear.from_dense(lin.to(_on(dev)), 0.1)
        x = torch.randn(300, 512, device=_on(dev), requires_grad=True)
        y = layer(x)
        gx, = torch.autograd.grad(y.square().sum(), [x])
        torch.cuda.synchronize(_on(dev))
    w = torch.sparse_csr_tensor(layer.crow_indices.long(), layer.col_indices.long(), layer.values.detach(),
                                (256, 512)).to_dense().double().cpu()
    ref = x.detach().double().cpu() @ w.t() + layer.bias.detach().double().cpu()
    assert rel_error(y.cpu(), ref) <= 1e-5
    assert rel_error(gx.cpu(), (2 * ref) @ w) <= 1e-5


@pytest.mark.parametrize("dev,cur", PAIRS)
def test_inplace(dev, cur):
    _two_gpus()
    torch.manual_seed(4)
    x = torch.randn(64, 1000)
    w = torch.randn(1000, 1000) / 32
    ln_w, ln_b = torch.randn(1000), torch.randn(1000)
    with torch.cuda.device(cur):
        d = _on(dev)
        s = sk.inplace_softmax(x.to(d).clone())
        n = sk.inplace_layer_norm(x.to(d).clone(), (1000,), ln_w.to(d), ln_b.to(d))
        m = sk.square_matmul(x.to(d).clone(), w.to(d))
        torch.cuda.synchronize(d)
    xd = x.double()
    assert rel_error(s.cpu(), torch.softmax(xd, -1)) <= 1e-5
    assert rel_error(n.cpu(), torch.nn.functional.layer_norm(xd, (1000,), ln_w.double(), ln_b.double())) <= 1e-5
    assert rel_error(m.cpu(), xd @ w.double()) <= 1e-5


@pytest.mark.parametrize("dev,cur", PAIRS)
def test_semi_structured_linear(dev, cur):
    _two_gpus()
    torch.manual_seed(5)
    lin = torch.nn.Linear(512, 256, dtype=torch.float16)
    with torch.cuda.device(cur):
        layer = sk.SemiStructuredLinear.from_dense(lin.to(_on(dev)))
        x = torch.randn(640, 512, device=_on(dev), dtype=torch.float16)
        y = layer(x)
        torch.cuda.synchronize(_on(dev))
    w = (layer.weight * layer.mask).detach().double().cpu()
    ref = x.double().cpu() @ w.t() + layer.bias.detach().double().cpu()
    assert y.device == _on(dev) and rel_error(y.cpu(), ref) <= 1e-2


@pytest.mark.parametrize("concurrent", [False, True], ids=["in-order", "concurrent"])
def test_block_sparse_linear_captured_backward(concurrent, monkeypatch):
    """A CUDA-graph capture of the layer's backward on cuda:1, then on cuda:0 (with
    bsr._concurrent_grads the weight and bias gradients fork onto a side stream of that device's
    capturing stream): the replays give the eager backward's input and weight gradients bit for bit,
    the bias gradient to rounding, and the captured call forked once, onto a side stream of its own device."""
    _two_gpus()
    from sparsekern import bsr
    from sparsekern.testing import capture_graph

    forks = []
    fork = bsr._on_side_stream
    monkeypatch.setattr(bsr, "_on_side_stream", lambda device, fn: forks.append(device) or fork(device, fn))
    for d in (1, 0):
        forks.clear()
        with torch.cuda.device(d):
            torch.manual_seed(5 + d)
            layer = BlockSparseLinear(512, 1024, density=0.25, block_size=64, device=_on(d), dtype=torch.bfloat16)
            params = (layer.weight, layer.bias)
            x = torch.randn(4096, 512, device=_on(d), dtype=torch.bfloat16)
            go = torch.randn(4096, 1024, device=_on(d), dtype=torch.bfloat16)

            def step():
                xg = x.clone().requires_grad_()
                return torch.autograd.grad(layer(xg), (xg, *params), go)

            monkeypatch.setattr(bsr, "_concurrent_grads", concurrent)
            graph, outs = capture_graph(step)
            graph.replay()
            torch.cuda.synchronize(_on(d))
            monkeypatch.setattr(bsr, "_concurrent_grads", False)
            want = step()
        assert all(o.device == _on(d) for o in outs)
        assert torch.equal(outs[0], want[0]) and torch.equal(outs[1], want[1])
        assert rel_error(outs[2], want[2].double()) <= 1e-2
        w = layer.to_dense_linear().weight.detach().double().cpu()
        assert rel_error(outs[0].cpu(), go.double().cpu() @ w) <= 2e-2
        assert forks == ([_on(d)] if concurrent else [])  # the captured call only
