"""Tensors that are not plain dense storage at the native boundary (session 31's audit): lazily
negated views, inference tensors, fake and meta tensors, forward-mode AD through the custom ops.
Each case gave a silently wrong result or a misleading error before."""
from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

import sparsekern as sk
from sparsekern import bsr

D = torch.float64


def _neg(t: torch.Tensor) -> torch.Tensor:
    """A tensor equal to `t` whose storage holds -t under the negative bit."""
    v = torch._neg_view(-t)
    assert v.is_neg() and torch.equal(v, t)
    return v


def _close(got, want):
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_negated_views_are_read_as_their_values():
    """to_dlpack exported the storage without the sign: every family computed with -t."""
    torch.manual_seed(0)
    a, b = torch.randn(4, 5, dtype=D), torch.randn(5, 3, dtype=D)
    _close(sk.matmul(_neg(a), b), a @ b)
    _close(sk.matmul(a, _neg(b)), a @ b)
    _close(sk.matmul_transb(a, _neg(b.mT.contiguous())), a @ b)
    x, f1, f2 = torch.randn(4, 6, dtype=D), torch.randn(2, 3, dtype=D), torch.randn(3, 2, dtype=D)
    _close(sk.kron_matmul(_neg(x), [f1, f2]), x @ torch.kron(f1, f2))
    _close(sk.kron_matmul(x, [_neg(f1), f2]), x @ torch.kron(f1, f2))
    s = bsr.BlockSparseMatrix.random((32, 32), 16, 0.5, dtype=D)
    xs, bias = torch.randn(3, 32, dtype=D), torch.randn(32, dtype=D)
    w = s.to_dense()
    _close(bsr.dds(_neg(xs), s), xs @ w)
    _close(bsr.dds(xs, s, _neg(bias)), xs @ w + bias)
    _close(bsr.dsd(s, _neg(xs.T.contiguous())), w @ xs.T)
    _close(bsr.dds(xs, s.with_values(_neg(s.values))), xs @ w)
    p, q = torch.randn(32, 8, dtype=D), torch.randn(8, 32, dtype=D)
    got = bsr.sdd(_neg(p), q, s).to_dense()
    _close(got, (p @ q) * (w != 0))
    dense = torch.randn(6, 5, dtype=D) * (torch.rand(6, 5) < 0.5)
    A = sk.CSRMatrix.from_dense(dense)
    _close(sk.csr_matmul(A, _neg(b)), dense @ b)
    u, v = torch.randn(6, 2, dtype=D), torch.randn(2, 5, dtype=D)
    _close(sk.csr_sddmm(_neg(u), v, A).values, (u @ v)[dense != 0])
    z, gw, gb = torch.randn(4, 7, dtype=D), torch.randn(7, dtype=D), torch.randn(7, dtype=D)
    _close(sk.inplace_layer_norm(z.clone(), 7, _neg(gw), _neg(gb)), F.layer_norm(z, (7,), gw, gb))
    sq = torch.randn(7, 7, dtype=D)
    _close(sk.square_matmul(z.clone(), _neg(sq)), z @ sq)
    y = torch.softmax(z, -1)
    g = torch.randn(4, 7, dtype=D)
    _close(sk.inplace_softmax_backward(g.clone(), _neg(y)), y * (g - (g * y).sum(-1, keepdim=True)))
    lin = sk.BlockSparseLinear(32, 32, density=0.5, block_size=16, dtype=D)
    _close(lin(_neg(xs)), lin(xs))
    kl = sk.KronLinear([(2, 3), (3, 2)], dtype=D)
    _close(kl(_neg(x)), kl(x))


@pytest.mark.parametrize("op", ["softmax", "layer_norm", "rms_norm", "square_matmul", "softmax_backward"])
def test_in_place_targets_refuse_negated_views(op):
    """A resolved copy would take the write: refused by name instead (the softmax wrote
    softmax(-x) under the sign bit)."""
    torch.manual_seed(1)
    t = _neg(torch.randn(4, 7, dtype=D))
    calls = {
        "softmax": lambda: sk.inplace_softmax(t),
        "layer_norm": lambda: sk.inplace_layer_norm(t, 7),
        "rms_norm": lambda: sk.inplace_rms_norm(t, 7),
        "square_matmul": lambda: sk.square_matmul(t, torch.eye(7, dtype=D)),
        "softmax_backward": lambda: sk.inplace_softmax_backward(t, torch.softmax(torch.randn(4, 7, dtype=D), -1)),
    }
    name = "grad" if op == "softmax_backward" else "x"
    with pytest.raises(ValueError, match=f"`{name}` is a lazily negated"):
        calls[op]()


def test_in_place_ops_refuse_inference_tensors_outside_inference_mode():
    """torch refuses `t.mul_()` there; the in-place ops wrote anyway."""
    with torch.inference_mode():
        t = torch.randn(4, 7, dtype=D)
    before = t.clone()
    for call in (lambda: sk.inplace_softmax(t), lambda: sk.inplace_layer_norm(t, 7),
                 lambda: sk.square_matmul(t, torch.eye(7, dtype=D))):
        with pytest.raises(RuntimeError, match="inference tensor"):
            call()
    assert torch.equal(t, before)
    with torch.inference_mode():  # inside inference mode it is allowed, as for torch's own ops
        _close(sk.inplace_softmax(t), torch.softmax(before, -1))


def _fake_results():
    from torch._subclasses.fake_tensor import FakeTensorMode

    s = bsr.BlockSparseMatrix.random((32, 32), 16, 0.5, dtype=D)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fs = bsr.BlockSparseMatrix.__new__(bsr.BlockSparseMatrix)
        fs.__dict__.update(s.__dict__)
        fs.values = mode.from_tensor(s.values)
        for name in bsr._INDEX_NAMES:
            setattr(fs, name, mode.from_tensor(getattr(s, name)))
        out = {
            "matmul": (sk.matmul(torch.empty(4, 5, dtype=D), torch.empty(5, 3, dtype=D)), (4, 3)),
            "bsr.dds": (bsr.dds(torch.empty(3, 32, dtype=D), fs), (3, 32)),
            "bsr.dsd": (bsr.dsd(fs, torch.empty(32, 3, dtype=D)), (32, 3)),
            "bsr.sdd": (bsr.sdd(torch.empty(32, 8, dtype=D), torch.empty(8, 32, dtype=D), fs).values,
                        tuple(s.values.shape)),
            "square_matmul": (sk.square_matmul(torch.empty(4, 6, dtype=D), torch.empty(6, 6, dtype=D)), (4, 6)),
            "inplace_softmax": (sk.inplace_softmax(torch.empty(4, 6, dtype=D)), (4, 6)),
        }
    return out


def test_fake_tensors_take_the_custom_ops():
    """Fake tensors reached the native module, whose overlap checks saw their null pointers as
    aliasing ("`out` must not share memory with `a`")."""
    from torch._subclasses.fake_tensor import FakeTensor

    for name, (r, shape) in _fake_results().items():
        assert isinstance(r, FakeTensor), name
        assert tuple(r.shape) == shape, name


def test_meta_tensors_in_every_block_sparse_and_csr_product():
    """dsd / sdd handed meta tensors to DLPack (BufferError), csr read .item() of meta indices."""
    s = bsr.BlockSparseMatrix.random((32, 32), 16, 0.5, dtype=D).to("meta")
    crow = torch.tensor([0, 1, 2], device="meta")
    col = torch.tensor([0, 1], device="meta")
    A = sk.CSRMatrix(crow, col, torch.empty(2, dtype=D, device="meta"), (2, 2), validate=False)

    def m(*shape):
        return torch.empty(*shape, dtype=D, device="meta")

    for r, shape in ((bsr.dsd(s, m(32, 3)), (32, 3)), (bsr.sdd(m(32, 8), m(8, 32), s).values, tuple(s.values.shape)),
                     (sk.csr_matmul(A, m(2, 3)), (2, 3)), (sk.csr_sddmm(m(2, 4), m(4, 2), A).values, (2,))):
        assert r.is_meta and tuple(r.shape) == shape


def _refused(fn):
    """NotImplementedError naming forward-mode AD (a TorchScript replay wraps it in a RuntimeError)."""
    with pytest.raises((NotImplementedError, RuntimeError), match="forward-mode AD"):
        fn()


def test_forward_ad_through_compiled_and_traced_ops_is_refused():
    """The custom ops had no forward formula: a compiled matmul dropped the tangent, a compiled
    in-place softmax passed its input's tangent through, a traced matmul under jvp gave zeros."""
    torch.manual_seed(2)
    a, b = torch.randn(4, 5, dtype=D), torch.randn(5, 3, dtype=D)
    ta = torch.randn_like(a)
    torch._dynamo.reset()
    cf = torch.compile(sk.matmul, backend="aot_eager")

    def compiled_matmul():
        with fwAD.dual_level():
            return fwAD.unpack_dual(cf(fwAD.make_dual(a, ta), b)).tangent

    _refused(compiled_matmul)
    cs = torch.compile(lambda z: sk.inplace_softmax(z.clone()), backend="eager")

    def compiled_softmax():
        with fwAD.dual_level():
            return fwAD.unpack_dual(cs(fwAD.make_dual(a, ta))).tangent

    # Refused, or (torch 2.11, whose tracing takes the softmax's functional path) the right tangent.
    try:
        t = compiled_softmax()
    except (NotImplementedError, RuntimeError) as e:
        assert "forward-mode AD" in str(e)
    else:
        y = torch.softmax(a, -1)
        assert t is not None
        _close(t, y * (ta - (ta * y).sum(-1, keepdim=True)))
    tf = torch.jit.trace(sk.matmul, (a, b))
    _refused(lambda: torch.func.jvp(lambda z: tf(z, b), (a,), (ta,)))
    # Outside forward mode the compiled and traced calls still run.
    _close(cf(a, b), a @ b)
    _close(tf(a, b), a @ b)
    torch._dynamo.reset()


def test_vmap_over_every_tensor_argument_is_refused_by_name():
    """The sdd pattern's values and square_matmul's workspace were not checked: torch's "Cannot
    access data pointer" instead of the package's message."""
    s = bsr.BlockSparseMatrix.random((32, 32), 16, 0.5, dtype=D)
    p, q = torch.randn(32, 8, dtype=D), torch.randn(8, 32, dtype=D)
    vals = torch.randn(2, *s.values.shape, dtype=D)
    with pytest.raises(NotImplementedError, match="bsr.sdd"):
        torch.func.vmap(lambda v: bsr.sdd(p, q, s.with_values(v)).values)(vals)
    x = torch.randn(4, 6, dtype=D)
    n = sk.square_matmul_workspace_size(x)
    ws = torch.empty(2, n, dtype=torch.uint8)
    with pytest.raises(NotImplementedError, match="square_matmul"):
        torch.func.vmap(lambda w: sk.square_matmul(x.clone(), torch.eye(6, dtype=D), workspace=w))(ws)
