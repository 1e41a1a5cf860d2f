"""CUDA-graph capture of every op family the way torch.cuda.graph's documentation does it: warm-up
calls on one stream, the capture on another (sparsekern.testing.capture_graph), so no per-stream
cache (plans, workspaces, choices) made in the warm-up is at hand in the capture. Each graph is
replayed on new inputs copied into the captured tensors (twice) and compared with float64; the
block-sparse, 2:4 and Kronecker layers have capture tests of their own (test_bsr, test_semi,
test_kron)."""
from __future__ import annotations

import pytest
import torch

import sparsekern as sk
from sparsekern.testing import capture_graph, randn, rel_error, tolerance

pytestmark = pytest.mark.cuda


@pytest.fixture(autouse=True)
def _cuda_only():
    if not (torch.cuda.is_available() and sk.cuda_available()):
        pytest.skip("needs CUDA")


def _replays(graph, inputs, check):
    """Replays `graph` twice on new values of `inputs` (copied in place), calling check() after each."""
    for _ in range(2):
        with torch.no_grad():
            for t in inputs:
                t.copy_(torch.randn_like(t))
        graph.replay()
        torch.cuda.synchronize()
        check()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_capture_sparse_linear(dtype):
    """SparseLinear (CSR weight, cuSPARSE SpMM and SDDMM): forward and the input, value and bias
    gradients in one graph."""
    torch.manual_seed(1)
    layer = sk.SparseLinear(256, 192, density=0.1, device="cuda", dtype=dtype)
    x = randn(77, 256, dtype=dtype, device="cuda").requires_grad_()
    go = randn(77, 192, dtype=dtype, device="cuda")
    params = [x, *layer.parameters()]

    def step():
        y = layer(x)
        return (y, *torch.autograd.grad(y, params, go))

    graph, (y, gx, gv, gb) = capture_graph(step)
    shape = (192, 256)

    def check():
        wd = layer.weight.to_dense().double()
        mask = sk.CSRMatrix(layer.crow_indices, layer.col_indices, torch.ones_like(layer.values), shape,
                            validate=False).to_dense().bool()
        t = tolerance(dtype)
        xd, god = x.detach().double(), go.double()
        assert rel_error(y, xd @ wd.t() + layer.bias.double()) <= t
        assert rel_error(gx, god @ wd) <= t
        gw = sk.CSRMatrix(layer.crow_indices, layer.col_indices, gv, shape, validate=False).to_dense()
        assert rel_error(gw, (god.t() @ xd) * mask) <= t
        assert rel_error(gb, god.sum(0)) <= t

    _replays(graph, [x, go], check)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_capture_dense_matmul(dtype):
    """sparsekern.matmul (batched) and matmul_transb (Q·Kᵀ) with their gradients in one graph."""
    torch.manual_seed(2)
    a = randn(3, 65, 48, dtype=dtype, device="cuda").requires_grad_()
    b = randn(3, 48, 40, dtype=dtype, device="cuda").requires_grad_()
    k = randn(3, 33, 48, dtype=dtype, device="cuda").requires_grad_()
    g1 = randn(3, 65, 40, dtype=dtype, device="cuda")
    g2 = randn(3, 65, 33, dtype=dtype, device="cuda")

    def step():
        y1, y2 = sk.matmul(a, b), sk.matmul_transb(a, k)
        return (y1, y2, *torch.autograd.grad((y1, y2), (a, b, k), (g1, g2)))

    graph, (y1, y2, ga, gb, gk) = capture_graph(step)

    def check():
        ad, bd, kd = a.detach().double(), b.detach().double(), k.detach().double()
        t = tolerance(dtype)
        assert rel_error(y1, ad @ bd) <= t and rel_error(y2, ad @ kd.mT) <= t
        assert rel_error(ga, g1.double() @ bd.mT + g2.double() @ kd) <= t
        assert rel_error(gb, ad.mT @ g1.double()) <= t
        assert rel_error(gk, g2.double().mT @ ad) <= t

    _replays(graph, [a, b, k, g1, g2], check)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_capture_inplace_inference(dtype):
    """The in-place inference ops in one graph: square_matmul, inplace_linear, inplace_layer_norm,
    inplace_rms_norm, inplace_softmax, on a captured buffer that each replay refills."""
    torch.manual_seed(3)
    n = 192
    x = randn(50, n, dtype=dtype, device="cuda")
    w = randn(n, n, dtype=dtype, device="cuda") / n ** 0.5
    lin = torch.nn.Linear(n, n, device="cuda", dtype=dtype)
    ln_w, ln_b = randn(n, dtype=dtype, device="cuda"), randn(n, dtype=dtype, device="cuda")
    buf = torch.empty_like(x)

    def step():
        with torch.no_grad():
            buf.copy_(x)
            sk.square_matmul(buf, w)
            sk.inplace_linear(buf, lin)
            sk.inplace_layer_norm(buf, (n,), ln_w, ln_b)
            sk.inplace_rms_norm(buf, (n,), ln_w)
            sk.inplace_softmax(buf)
        return buf

    graph, out = capture_graph(step)

    def check():
        r = x.double() @ w.double()
        r = r @ lin.weight.double().t() + lin.bias.double()
        r = torch.nn.functional.layer_norm(r, (n,), ln_w.double(), ln_b.double())
        r = torch.nn.functional.rms_norm(r, (n,), ln_w.double(), eps=torch.finfo(dtype).eps)
        r = torch.softmax(r, -1)
        assert rel_error(out, r) <= 4 * tolerance(dtype)

    _replays(graph, [x], check)


def test_capture_many_sparse_layers():
    """A training step over 40 SparseLinear layers (80 CSR patterns with the transposes of the
    backward) captures and replays right: before session 28 a 64-pattern LRU evicted them in turn,
    and the capture's structure check of an evicted pattern synchronised (capture invalidated)."""
    torch.manual_seed(4)
    layers = torch.nn.Sequential(*[sk.SparseLinear(64, 64, density=0.2, device="cuda") for _ in range(40)])
    x = randn(9, 64, dtype=torch.float32, device="cuda").requires_grad_()

    def step():
        y = layers(x)
        return (y, *torch.autograd.grad(y.square().sum(), [x]))

    graph, (y, gx) = capture_graph(step)

    def check():
        xd = x.detach().double().requires_grad_()
        h = xd
        for layer in layers:
            h = h @ layer.weight.to_dense().double().t() + layer.bias.double()
        (want,) = torch.autograd.grad(h.square().sum(), [xd])
        assert rel_error(y, h) <= 1e-5 and rel_error(gx, want) <= 1e-5

    _replays(graph, [x], check)
    del graph
    sk.csr.release_graph_buffers()
