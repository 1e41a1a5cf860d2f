"""In-place family: softmax (+ backward), layer_norm, rms_norm, square_matmul, inplace_linear.

Every op is checked against a float64 reference on random data, that it really is in place (same
data_ptr; on CUDA no allocation beyond 1 MiB, or beyond the workspace for square_matmul), that
elements outside the view it was given stay untouched (NaN poison), and that every refused call
names the argument and leaves its input unchanged.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import sparsekern
from sparsekern import _C, compat
from sparsekern.testing import randn, rel_error, run_python, tolerance

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
# Row lengths: 1, odd and prime lengths, both sides of every register-tile boundary of the CUDA
# kernels (64 … 16384), the streaming kernel beyond, and the 131072 / 256K.
COLS = [1, 3, 8, 64, 65, 127, 256, 511, 1000, 1025, 2048, 3000, 4097, 8191, 16384, 16385, 131072, 262144]


def _rows_for(cols: int) -> int:
    """Enough rows to fill several blocks/warps, few enough to keep the CPU run short."""
    return max(2, min(37, 150_000 // cols))


def _tol(dtype, device=None) -> float:
    tf32 = device is not None and device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32
    return tolerance(dtype, tf32)


def _assert_close(out, ref, dtype, device=None, factor=1.0):
    err = rel_error(out, ref)
    assert err <= factor * _tol(dtype, device), f"rel error {err:.3e} > {factor * _tol(dtype, device):.1e}"


class _Peak:
    """On CUDA: asserts the block allocates at most `limit` bytes beyond what was live before."""

    def __init__(self, device, limit=1 << 20):
        self.cuda = device.type == "cuda"
        self.limit = limit

    def __enter__(self):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        return self

    def __exit__(self, *exc):
        if self.cuda and exc[0] is None:
            torch.cuda.synchronize()
            extra = torch.cuda.max_memory_allocated() - self.base
            assert extra <= self.limit, f"allocated {extra} bytes, limit {self.limit}"


def _ref_softmax(x64: torch.Tensor, dim: int) -> torch.Tensor:
    """float64 softmax whose fully masked (all -inf) rows are zeros, as the op specifies."""
    m = x64.amax(dim, keepdim=True)
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(x64 - m)
    s = e.sum(dim, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))


def _snapshot(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()


def _unchanged(t: torch.Tensor, snap: torch.Tensor) -> bool:
    return torch.equal(torch.nan_to_num(t.detach().double(), nan=1.5), torch.nan_to_num(snap.double(), nan=1.5))


# --------------------------------------------------------------------------------------------
# softmax
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", COLS)
def test_softmax_rows(device, dtype, cols):
    rows = _rows_for(cols)
    x = randn(rows, cols, dtype=dtype, device=device) * 4
    ref = _ref_softmax(x.double(), -1)
    ptr = x.data_ptr()
    with _Peak(device):
        y = sparsekern.inplace_softmax(x)
    assert y is x and x.data_ptr() == ptr
    _assert_close(x, ref, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_softmax_masks_and_large_logits(device, dtype):
    big = 3e4 if dtype == torch.float16 else 1e30
    x = randn(6, 5, 77, dtype=torch.float64) * 10
    x[0] += big                                   # large logits: must not overflow
    x[1, :, ::3] = -math.inf                      # a -inf mask on every third column
    x[2, 1] = -math.inf                           # fully masked rows -> zeros, not NaN
    x[3, :, 0] = big                              # one huge entry dominates
    x[4] *= 1e3                                   # large magnitudes
    x = x.to(dtype=dtype, device=device)
    ref = _ref_softmax(x.double(), -1)
    sparsekern.inplace_softmax(x)
    assert torch.isfinite(x).all()
    assert (x[2, 1] == 0).all()
    assert (x[1, :, ::3] == 0).all()
    _assert_close(x, ref, dtype)


@pytest.mark.parametrize("cols", [5, 300, 20000])
def test_softmax_nan_propagates_like_torch(device, cols):
    x = randn(3, cols, device=device)
    x[1, cols // 2] = math.nan
    ref = torch.softmax(x, -1)
    sparsekern.inplace_softmax(x)
    assert torch.isnan(x[1]).all() and torch.isnan(ref[1]).all()
    assert torch.isfinite(x[0]).all() and torch.isfinite(x[2]).all()


@pytest.mark.parametrize("cols", [5, 300, 20000])
def test_softmax_fully_masked_long_rows(device, cols):
    """Every kernel (register tile, streaming) turns an all -inf row into zeros."""
    x = torch.full((3, cols), -math.inf, device=device)
    x[1] = randn(cols, device=device)
    ref = _ref_softmax(x.double(), -1)
    sparsekern.inplace_softmax(x)
    assert (x[0] == 0).all() and (x[2] == 0).all()
    _assert_close(x, ref, torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2])
def test_softmax_any_dim(device, dtype, dim):
    x = randn(5, 33, 7, dtype=dtype, device=device)
    ref = _ref_softmax(x.double(), dim)
    with _Peak(device):
        sparsekern.inplace_softmax(x, dim=dim)
    _assert_close(x, ref, dtype)


def test_softmax_views_leave_the_rest_untouched(device):
    base = torch.full((4, 9, 130), math.nan, device=device)
    # 1. rows sliced out of wider rows (row stride 130 > 100), every other leading row
    view = base[:, ::2, :100]
    view.copy_(randn(*view.shape, device=device))
    ref = _ref_softmax(view.double(), -1)
    sparsekern.inplace_softmax(view)
    _assert_close(view, ref, torch.float32)
    assert torch.isnan(base[:, 1::2]).all() and torch.isnan(base[..., 100:]).all()
    # 2. a permuted tensor (leading dims in any order), softmax over a strided (non-unit) dim
    x = randn(6, 40, 11, device=device).permute(2, 0, 1)
    ref = _ref_softmax(x.double(), 1)
    sparsekern.inplace_softmax(x, dim=1)
    _assert_close(x, ref, torch.float32)
    # 3. the transpose of a contiguous matrix, softmax along its (strided) last dim
    x = randn(50, 70, device=device).mT
    ref = _ref_softmax(x.double(), -1)
    sparsekern.inplace_softmax(x)
    _assert_close(x, ref, torch.float32)
    # 4. a misaligned start (offset by one element): the kernels fall back to scalar loads
    flat = randn(1 + 8 * 64, device=device, dtype=torch.float16)
    x = flat[1:].view(8, 64)
    ref = _ref_softmax(x.double(), -1)
    sparsekern.inplace_softmax(x)
    _assert_close(x, ref, torch.float16)


def test_softmax_scalar_and_empty(device):
    s = torch.tensor(3.0, device=device)
    sparsekern.inplace_softmax(s)
    assert s.item() == 1.0
    for shape in [(0, 5), (5, 0), (2, 0, 3)]:
        x = torch.empty(shape, device=device)
        assert sparsekern.inplace_softmax(x) is x


def test_softmax_autograd(device):
    base = randn(3, 17, 29, dtype=torch.float64, device=device).requires_grad_()
    go = randn(3, 17, 29, dtype=torch.float64, device=device)
    for dim in (-1, 1):
        x = base.clone()  # a non-leaf: the in-place op may overwrite it
        y = sparsekern.inplace_softmax(x, dim=dim)
        assert y is x
        (g,) = torch.autograd.grad(y, base, go)
        (g_ref,) = torch.autograd.grad(torch.softmax(base, dim), base, go)
        _assert_close(g, g_ref, torch.float64)
    # through a view of a larger non-leaf (autograd rebases the view's history)
    x = base.clone()
    sparsekern.inplace_softmax(x[1:])
    (g,) = torch.autograd.grad(x, base, go)
    ref = torch.cat([base[:1], torch.softmax(base[1:], -1)])
    (g_ref,) = torch.autograd.grad(ref, base, go)
    _assert_close(g, g_ref, torch.float64)


def test_softmax_gradcheck():
    x = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: sparsekern.inplace_softmax(t.clone(), dim=-1), (x,))
    assert torch.autograd.gradcheck(lambda t: sparsekern.inplace_softmax(t.clone(), dim=0), (x,))


# --------------------------------------------------------------------------------------------
# softmax backward
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [1, 3, 64, 1000, 4097, 16385, 131072])
def test_softmax_backward_rows(device, dtype, cols):
    rows = _rows_for(cols)
    y = torch.softmax(randn(rows, cols, dtype=torch.float64) * 3, -1).to(dtype=dtype, device=device)
    g = randn(rows, cols, dtype=dtype, device=device)
    y64, g64 = y.double(), g.double()
    ref = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True))
    ptr = g.data_ptr()
    with _Peak(device):
        out = sparsekern.inplace_softmax_backward(g, y)
    assert out is g and g.data_ptr() == ptr
    # the result is a difference of O(1/cols) terms: compare against the scale of y·g, not of ref
    err = (g.double() - ref).norm() / (y64 * g64).norm().clamp_min(1e-30)
    assert err <= 2 * _tol(dtype), f"{err:.3e}"


def test_softmax_backward_layouts(device):
    """grad and y with different layouts (and a non-innermost dim) map row by row consistently."""
    y = torch.softmax(randn(9, 31, 12, device=device), 1)
    g = randn(12, 31, 9, device=device).permute(2, 1, 0)  # same shape, different strides
    ref = y.double() * (g.double() - (g.double() * y.double()).sum(1, keepdim=True))
    sparsekern.inplace_softmax_backward(g, y, dim=1)
    _assert_close(g, ref, torch.float32)


# --------------------------------------------------------------------------------------------
# layer_norm / rms_norm
# --------------------------------------------------------------------------------------------
NORM_COLS = [1, 3, 64, 100, 1000, 4096, 4097, 16385, 131072]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", NORM_COLS)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(device, dtype, cols, affine):
    rows = _rows_for(cols)
    x = (randn(rows, cols, dtype=torch.float64) * 3 + 5).to(dtype=dtype, device=device)
    w = randn(cols, dtype=dtype, device=device) if affine else None
    b = randn(cols, dtype=dtype, device=device) if affine else None
    ref = F.layer_norm(x.double(), (cols,), None if w is None else w.double(), None if b is None else b.double(),
                       1e-5)
    ptr = x.data_ptr()
    with _Peak(device):
        out = sparsekern.inplace_layer_norm(x, cols, w, b, eps=1e-5)
    assert out is x and x.data_ptr() == ptr
    _assert_close(x, ref, dtype, factor=1 if cols > 1 else float("inf"))
    if cols == 1:  # a single element normalises to exactly the bias
        assert torch.equal(x.flatten(), (torch.zeros_like(x) if b is None else b.expand_as(x)).flatten())


def test_layer_norm_large_mean_is_stable(device):
    """Two-pass statistics: a mean 1e4 times the spread loses nothing (fp32)."""
    for cols in (777, 40000):  # register tile and streaming kernel
        x = randn(4, cols, dtype=torch.float64) + 1e4
        ref = F.layer_norm(x, (cols,))
        x = x.float().to(device)
        sparsekern.inplace_layer_norm(x, (cols,))
        assert rel_error(x, ref) < 5e-3  # limited by fp32 rounding of the input itself (~1e4·6e-8)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", NORM_COLS)
def test_rms_norm(device, dtype, cols):
    rows = _rows_for(cols)
    x = randn(rows, cols, dtype=dtype, device=device) * 2
    w = randn(cols, dtype=dtype, device=device)
    # eps=None: torch's default, the eps of the type it computes in (fp32 for fp16 / bf16; until
    # session 30 the 16-bit eps was taken: 25-67% off torch for rows of RMS 0.03-0.1 in bf16)
    eps = torch.finfo(dtype if dtype in (torch.float32, torch.float64) else torch.float32).eps
    x64 = x.double()
    ref = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()
    theirs = F.rms_norm(x, (cols,), w) if hasattr(F, "rms_norm") and x.device.type == "cpu" else None
    with _Peak(device):
        out = sparsekern.inplace_rms_norm(x, (cols,), w)
    assert out is x
    _assert_close(x, ref, dtype)
    if theirs is not None:
        _assert_close(x, theirs.double(), dtype)


def test_norms_multi_dim_and_views(device):
    # normalized_shape over two trailing dims
    x = randn(5, 3, 7, 11, device=device)
    w, b = randn(7, 11, device=device), randn(7, 11, device=device)
    ref = F.layer_norm(x.double(), (7, 11), w.double(), b.double())
    sparsekern.inplace_layer_norm(x, (7, 11), w, b)
    _assert_close(x, ref, torch.float32)
    # rows taken from a wider buffer: leading dims strided, NaN poison must stay
    base = torch.full((6, 4, 300), math.nan, device=device)
    view = base[::2, :, :257]
    view.copy_(randn(*view.shape, device=device))
    ref = F.rms_norm(view.double(), (257,), eps=1e-6)
    sparsekern.inplace_rms_norm(view, 257, eps=1e-6)
    _assert_close(view, ref, torch.float32)
    assert torch.isnan(base[1::2]).all() and torch.isnan(base[..., 257:]).all()
    # permuted leading dims (rows in any order), contiguous rows
    x = randn(3, 8, 64, device=device).transpose(0, 1)
    ref = F.layer_norm(x.double(), (64,))
    sparsekern.inplace_layer_norm(x, 64)
    _assert_close(x, ref, torch.float32)
    # empty
    e = torch.empty(0, 16, device=device)
    assert sparsekern.inplace_layer_norm(e, 16) is e


# --------------------------------------------------------------------------------------------
# square_matmul / inplace_linear
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (1000, 64), (2, 3, 129), (7, 256)])
@pytest.mark.parametrize("transpose_w", [False, True])
def test_square_matmul(device, dtype, shape, transpose_w):
    n = shape[-1]
    x = randn(*shape, dtype=dtype, device=device)
    w = randn(n, n, dtype=dtype, device=device) / math.sqrt(n)
    ref = x.double() @ (w.double().mT if transpose_w else w.double())
    ptr = x.data_ptr()
    sparsekern.square_matmul(x, w, transpose_w=transpose_w)  # warm-up (cuBLAS workspace, handles)
    x.copy_(randn(*shape, dtype=dtype, device=device))
    ref = x.double() @ (w.double().mT if transpose_w else w.double())
    with _Peak(device, limit=sparsekern.square_matmul_workspace_size(x) + (1 << 20)):
        out = sparsekern.square_matmul(x, w, transpose_w=transpose_w)
    assert out is x and x.data_ptr() == ptr
    _assert_close(x, ref, dtype, device)


def test_square_matmul_panels_and_strided_rows(device):
    """Several panels (a workspace of 3 rows, the last panel ragged), rows with a pitch, poison."""
    n, rows = 40, 11
    base = torch.full((rows, 64), math.nan, device=device)
    x = base[:, :n]
    x.copy_(randn(rows, n, device=device))
    w = randn(n, n, device=device)
    bias = randn(n, device=device)
    ref = x.double() @ w.double().mT + bias.double()
    ws = torch.empty(3 * n * 4, dtype=torch.uint8, device=device)
    stream = sparsekern._core.stream_of(x)
    blas = sparsekern._core.cublas_workspace(x, stream)[:2] if x.is_cuda else (0, 0)
    _C.square_matmul(x, w, True, bias, False, True, ws, *blas, stream)
    _assert_close(x, ref, torch.float32)
    assert torch.isnan(base[:, n:]).all()
    # a workspace smaller than one row is refused before anything is written
    snap = _snapshot(x)
    with pytest.raises(ValueError, match="workspace"):
        _C.square_matmul(x, w, False, None, False, True, ws[: 4 * n - 4], *blas, stream)
    assert _unchanged(x, snap)


def test_square_matmul_caller_workspace(device):
    """A caller buffer replaces the allocation: no device memory beyond it, any size >= one row."""
    x = randn(1000, 64, device=device)
    w = randn(64, 64, device=device)
    ws = torch.empty(7 * 64, dtype=torch.float32, device=device)  # 7 rows: 143 panels, ragged last one
    ref = x.double() @ w.double()
    sparsekern.square_matmul(randn(3, 64, device=device), w, workspace=ws)  # warm-up (cuBLAS handle)
    with _Peak(device, limit=0):
        sparsekern.square_matmul(x, w, workspace=ws)
    _assert_close(x, ref, torch.float32, device)
    snap = _snapshot(x)
    with pytest.raises(ValueError, match="workspace"):
        sparsekern.square_matmul(x, w, workspace=ws[:63])
    with pytest.raises(ValueError, match="workspace"):
        sparsekern.square_matmul(x, w, workspace=x[:2])
    assert _unchanged(x, snap)


def test_square_matmul_workspace_bound():
    for rows, n, dtype in [(8192, 4096, torch.float16), (10**6, 4096, torch.float16), (5, 7, torch.float32),
                           (3 * 10**6, 1024, torch.float32)]:
        x = torch.empty(rows, n, dtype=dtype, device="meta")
        size = sparsekern.square_matmul_workspace_size(x)
        x_bytes = rows * n * x.element_size()
        assert size <= min(x_bytes, max(0.02 * x_bytes, 64 << 20))
        assert size % (n * x.element_size()) == 0 and size > 0
        panel = size // (n * x.element_size())
        assert panel == rows or panel % 256 == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("n", [96, 129])  # 129: the bias is added by the scalar (unvectorised) copy-back
def test_inplace_linear(device, dtype, bias, n):
    lin = torch.nn.Linear(n, n, bias=bias).to(device=device, dtype=dtype)
    x = randn(4, 33, n, dtype=dtype, device=device)
    with torch.no_grad():
        ref = F.linear(x.double(), lin.weight.double(), None if lin.bias is None else lin.bias.double())
        out = sparsekern.inplace_linear(x, lin)
    assert out is x
    _assert_close(x, ref, dtype, device)


def test_square_matmul_autograd():
    """Differentiable in x while w is constant (dx needs only w)."""
    w = torch.randn(6, 6, dtype=torch.float64)
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    for t in (False, True):
        assert torch.autograd.gradcheck(lambda a: sparsekern.square_matmul(a.clone(), w, transpose_w=t), (x,))


def test_compat_square_matmul(device):
    a = randn(12, dtype=torch.float32, device=device)
    b = randn(4, 4, device=device)
    ref = a.double().view(3, 4) @ b.double()
    assert compat.square_matmul(a, b, 3, 4) is a
    _assert_close(a.view(3, 4), ref, torch.float32, device)
    with pytest.raises(ValueError, match="n_rows"):
        compat.square_matmul(a, b, 5, 4)


# --------------------------------------------------------------------------------------------
# bad input: a clear error naming the argument, and the input left unchanged
# --------------------------------------------------------------------------------------------
def _other_device(device):
    return torch.device("meta") if device.type == "cpu" else torch.device("cpu")


def _bad_cases(device):
    x = randn(4, 16, device=device)
    w = randn(16, 16, device=device)
    ints = torch.arange(64, device=device).view(4, 16)
    leaf = randn(4, 16, device=device).requires_grad_()
    buf = randn(32, 16, device=device)
    wg = randn(16, 16, device=device).requires_grad_()
    noncontig = randn(16, 4, device=device).mT
    y = torch.softmax(randn(4, 16, device=device), -1)
    return [
        # softmax
        ("softmax int dtype", ints, lambda: sparsekern.inplace_softmax(ints), TypeError, "x"),
        ("softmax dim", x, lambda: sparsekern.inplace_softmax(x, dim=2), ValueError, "dim"),
        ("softmax expanded", None, lambda: sparsekern.inplace_softmax(randn(1, 16, device=device).expand(4, 16)),
         ValueError, "x"),
        ("softmax leaf", leaf, lambda: sparsekern.inplace_softmax(leaf), RuntimeError, "x"),
        ("softmax view of leaf", leaf, lambda: sparsekern.inplace_softmax(leaf[1:]), RuntimeError, "x"),
        # softmax backward
        ("bwd shape", x, lambda: sparsekern.inplace_softmax_backward(x, y[:, :8]), ValueError, "y"),
        ("bwd dtype", x, lambda: sparsekern.inplace_softmax_backward(x, y.double()), TypeError, "y"),
        ("bwd alias", buf, lambda: sparsekern.inplace_softmax_backward(buf[:4], buf[2:6]), ValueError, "y"),
        # layer_norm / rms_norm
        ("ln non-contiguous last dim", noncontig, lambda: sparsekern.inplace_layer_norm(noncontig, 16), ValueError, "x"),
        ("ln normalized_shape", x, lambda: sparsekern.inplace_layer_norm(x, 15), ValueError, "normalized_shape"),
        ("ln wrong dims", x, lambda: sparsekern.inplace_layer_norm(x, (2, 4, 16)), ValueError, "normalized_shape"),
        ("ln weight shape", x, lambda: sparsekern.inplace_layer_norm(x, 16, w[0, :8]), ValueError, "weight"),
        ("ln weight dtype", x, lambda: sparsekern.inplace_layer_norm(x, 16, w[0].half()), TypeError, "weight"),
        ("ln weight device", x, lambda: sparsekern.inplace_layer_norm(x, 16, w[0].to(_other_device(device))),
         ValueError, "weight"),
        ("ln int dtype", ints, lambda: sparsekern.inplace_layer_norm(ints, 16), TypeError, "x"),
        ("ln eps", x, lambda: sparsekern.inplace_layer_norm(x, 16, eps=-1.0), ValueError, "eps"),
        ("ln x requires grad", None, lambda: sparsekern.inplace_layer_norm(leaf * 1, 16), RuntimeError, "x"),
        ("ln weight requires grad", x, lambda: sparsekern.inplace_layer_norm(x, 16, wg[0]), RuntimeError, "weight"),
        ("rms non-contiguous last dim", noncontig, lambda: sparsekern.inplace_rms_norm(noncontig, 16), ValueError, "x"),
        ("rms weight alias", buf, lambda: sparsekern.inplace_rms_norm(buf, 16, buf[3]), ValueError, "weight"),
        # square_matmul
        ("mm w not square", x, lambda: sparsekern.square_matmul(x, w[:, :8]), ValueError, "w"),
        ("mm w wrong n", x, lambda: sparsekern.square_matmul(x, w[:8, :8]), ValueError, "w"),
        ("mm w 3-D", x, lambda: sparsekern.square_matmul(x, w.view(1, 16, 16)), ValueError, "w"),
        ("mm w device", x, lambda: sparsekern.square_matmul(x, w.to(_other_device(device))), ValueError, "w"),
        ("mm w dtype", x, lambda: sparsekern.square_matmul(x, w.half()), TypeError, "w"),
        ("mm non-contiguous last dim", noncontig, lambda: sparsekern.square_matmul(noncontig, w[:4, :4]),
         ValueError, "x"),
        ("mm int dtype", ints, lambda: sparsekern.square_matmul(ints, w), TypeError, "x"),
        ("mm alias", buf, lambda: sparsekern.square_matmul(buf, buf[:16]), ValueError, "w"),
        ("mm leaf", leaf, lambda: sparsekern.square_matmul(leaf, w), RuntimeError, "x"),
        ("mm w requires grad", x, lambda: sparsekern.square_matmul(x, wg), RuntimeError, "w"),
        ("linear not square", x, lambda: sparsekern.inplace_linear(x, torch.nn.Linear(16, 8).to(device)),
         ValueError, "linear"),
    ]


def test_bad_inputs(device):
    for name, target, call, exc, match in _bad_cases(device):
        snap = None if target is None else _snapshot(target)
        with pytest.raises(exc, match=match):
            call()
        if target is not None:
            assert _unchanged(target, snap), f"{name}: input changed by a refused call"


def test_library_validates_too(device):
    """The C++ dispatchers refuse aliasing on their own (callers other than the Python layer)."""
    buf = randn(32, 16, device=device)
    snap = _snapshot(buf)
    stream = sparsekern._core.stream_of(buf)
    ws = torch.empty(1 << 12, dtype=torch.uint8, device=device)
    with pytest.raises(ValueError, match="w"):
        _C.square_matmul(buf, buf[:16], False, None, False, True, ws, 0, 0, stream)
    with pytest.raises(ValueError, match="y"):
        _C.inplace_softmax_backward(buf[:4], buf[2:6], 1, stream)
    with pytest.raises(ValueError, match="weight"):
        _C.inplace_layer_norm(buf, 1, buf[5], None, 1e-5, stream)
    with pytest.raises(TypeError, match="x"):
        _C.inplace_softmax(torch.arange(4, device=device), 0, stream)
    assert _unchanged(buf, snap)


def test_custom_ops_trace():
    """The ops are torch.library custom ops with fake impls (torch.compile / export can trace them)."""
    x = torch.randn(3, 8)
    w = torch.randn(8, 8)
    for op, args in [(torch.ops.sparsekern.inplace_softmax.default, (x.clone(), -1)),
                     (torch.ops.sparsekern.inplace_softmax_backward.default, (x.clone(), torch.softmax(x, -1), -1)),
                     (torch.ops.sparsekern.inplace_layer_norm.default, (x.clone(), [8], None, None, 1e-5)),
                     (torch.ops.sparsekern.inplace_rms_norm.default, (x.clone(), [8], w[0].clone(), 1e-6)),
                     (torch.ops.sparsekern.square_matmul.default, (x.clone(), w, False, None, None)),
                     (torch.ops.sparsekern.square_matmul.default,
                      (x.clone(), w, True, w[1].clone(), torch.empty(64, dtype=torch.uint8)))]:
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))


# --------------------------------------------------------------------------------------------
# patch_inplace on BERT / RoBERTa built from a config (random weights, no downloads)
# --------------------------------------------------------------------------------------------
def _tiny_model(kind: str, attn: str = "eager", layers: int = 2):
    transformers = pytest.importorskip("transformers")
    cfg_cls, model_cls = {"bert": (transformers.BertConfig, transformers.BertModel),
                          "roberta": (transformers.RobertaConfig, transformers.RobertaModel)}[kind]
    cfg = cfg_cls(hidden_size=64, num_hidden_layers=layers, num_attention_heads=4, intermediate_size=128,
                  vocab_size=100, max_position_embeddings=300, attn_implementation=attn)
    return model_cls(cfg)


def _inputs(device, batch=3, seq=11):
    ids = torch.randint(3, 100, (batch, seq), device=device)
    mask = torch.ones(batch, seq, dtype=torch.long, device=device)
    mask[1, seq - 4:] = 0  # padding: -inf-like entries in the additive attention mask
    return ids, mask


@pytest.mark.parametrize("kind", ["bert", "roberta"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_patch_inplace_same_outputs(device, kind, dtype):
    from sparsekern.integrations import patch_inplace, unpatch_inplace

    model = _tiny_model(kind).to(device=device, dtype=dtype).eval()
    ids, mask = _inputs(device)
    with torch.no_grad():
        ref = model(ids, attention_mask=mask, output_attentions=True)
    report = patch_inplace(model)
    assert len(report.attention) == 2 and not report.skipped
    assert len(report.layer_norms) == 5 and len(report.linears) == 2  # embeddings + 2 per layer; attn out-proj
    with torch.no_grad():
        out = model(ids, attention_mask=mask, output_attentions=True)
    tol = 4 * tolerance(dtype)  # a few roundings differ along 2 layers
    assert rel_error(out.last_hidden_state, ref.last_hidden_state) <= tol
    assert rel_error(out.pooler_output, ref.pooler_output) <= tol
    for a, r in zip(out.attentions, ref.attentions):
        assert rel_error(a, r) <= tol
    unpatch_inplace(model)
    assert not any(hasattr(m, "_sparsekern_inplace_patched") for m in model.modules())
    with torch.no_grad():
        again = model(ids, attention_mask=mask)
    assert torch.equal(again.last_hidden_state, ref.last_hidden_state)


def test_patch_inplace_falls_back_outside_inference(device):
    from sparsekern.integrations import patch_inplace

    model = _tiny_model("bert").to(device)
    ids, mask = _inputs(device)
    ref_model = _tiny_model("bert").to(device)
    ref_model.load_state_dict(model.state_dict())
    patch_inplace(model)
    patch_inplace(model)  # idempotent
    # training mode (dropout active): the original code path, same RNG use, same result
    model.train(), ref_model.train()
    torch.manual_seed(1)
    out = model(ids, attention_mask=mask).last_hidden_state
    torch.manual_seed(1)
    ref = ref_model(ids, attention_mask=mask).last_hidden_state
    assert torch.equal(out, ref)
    # eval with autograd on: gradients flow (LayerNorm/linear sites take the original path)
    model.eval(), ref_model.eval()
    out = model(ids, attention_mask=mask).last_hidden_state
    ref = ref_model(ids, attention_mask=mask).last_hidden_state
    assert rel_error(out, ref) <= 4 * tolerance(torch.float32)
    out.sum().backward()
    assert model.encoder.layer[0].attention.self.query.weight.grad is not None


def test_patch_inplace_skips_sdpa_and_bad_probes(device, monkeypatch):
    from sparsekern.integrations import inplace as integ
    from sparsekern.integrations import patch_inplace

    model = _tiny_model("bert", attn="sdpa").to(device).eval()
    ids, mask = _inputs(device)
    with torch.no_grad():
        ref = model(ids, attention_mask=mask).last_hidden_state
    report = patch_inplace(model)
    with torch.no_grad():
        assert rel_error(model(ids, attention_mask=mask).last_hidden_state, ref) <= 4 * tolerance(torch.float32)
    assert not report.attention and all("sdpa" in r for r in report.skipped.values())
    # LayerNorms and the attention output projection do not depend on how attention is computed
    assert len(report.layer_norms) == 5 and len(report.linears) == 2

    # A probe that disagrees leaves the site unpatched (robust to a changed modeling file).
    model = _tiny_model("bert").to(device).eval()
    monkeypatch.setattr(integ, "_inplace_eager_attention",
                        lambda *a, **k: (torch.zeros_like(a[1]).transpose(1, 2), torch.zeros(1)))
    report = patch_inplace(model)
    assert not report.attention and any("disagreed" in r for r in report.skipped.values())


def test_patch_inplace_after_patch_bert_attention(device):
    """Composes with patch_bert_attention (Q·Kᵀ through matmul_transb): its attention is patched too."""
    from sparsekern.integrations import patch_bert_attention, patch_inplace

    model = _tiny_model("bert").to(device).eval()
    ids, mask = _inputs(device)
    with torch.no_grad():
        ref = model(ids, attention_mask=mask).last_hidden_state
    patch_bert_attention(model)
    report = patch_inplace(model)
    assert len(report.attention) == 2 and not report.skipped
    with torch.no_grad():
        out = model(ids, attention_mask=mask).last_hidden_state
    assert rel_error(out, ref) <= 4 * tolerance(torch.float32)


def test_patch_inplace_uses_less_memory(device):
    if device.type != "cuda":
        pytest.skip("peak memory is measured with torch.cuda.max_memory_allocated")
    from sparsekern.integrations import patch_inplace

    model = _tiny_model("bert", layers=1).to(device=device, dtype=torch.float16).eval()
    ids, mask = _inputs(device, batch=8, seq=256)

    def peak():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        with torch.no_grad():
            out = model(ids, attention_mask=mask).last_hidden_state
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base, out

    peak()  # warm-up
    before, ref = peak()
    patch_inplace(model)
    peak()
    after, out = peak()
    assert rel_error(out, ref) <= 4 * tolerance(torch.float16)
    scores = 8 * 4 * 256 * 256 * 2  # one fp16 score matrix
    assert after <= before - scores // 2, f"patched peak {after} vs unpatched {before}"


def test_square_matmul_strided_w(device):
    """w with no unit stride (a strided slice) and a non-contiguous bias still work."""
    big = randn(64, 64, device=device)
    w = big[::2, ::2]
    x = randn(9, 32, device=device)
    lin = torch.nn.Linear(32, 32).to(device)
    ref = x.double() @ w.double()
    sparsekern.square_matmul(x, w)
    _assert_close(x, ref, torch.float32, device)
    x = randn(9, 32, device=device)
    with torch.no_grad():
        lin.weight.copy_(w)
        ref = F.linear(x.double(), lin.weight.double(), lin.bias.double())
        sparsekern.inplace_linear(x, lin)
    _assert_close(x, ref, torch.float32, device)


# --------------------------------------------------------------------------------------------
# 16-bit warp-row kernels (CUDA: one warp per row for 256 < cols ≤ 4096 when cols % 8 == 0 and the
# rows are 16-byte aligned; the softmax backward up to 2048). Both sides of every switch point,
# multiples and non-multiples of the 8-element vector, more rows than one pass of the persistent
# grid (the next-row prefetch and the grid-stride loop), strided and misaligned views.
# --------------------------------------------------------------------------------------------
HALF_DTYPES = [torch.float16, torch.bfloat16]
WARP_COLS = [255, 256, 264, 511, 512, 520, 1000, 1001, 1024, 1032, 2047, 2048, 2056, 4088, 4095, 4096, 4104]


def _norm_refs(x64, w64, b64, eps):
    ln = F.layer_norm(x64, (x64.shape[-1],), w64, b64, eps=eps)
    rms = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w64
    return ln, rms


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("cols", WARP_COLS)
def test_warp_row_boundaries(device, dtype, cols):
    rows = 5
    x = (randn(rows, cols, dtype=torch.float64) * 3).to(dtype=dtype, device=device)
    x[1, ::7] = -math.inf  # masked entries in the softmax
    x_sm = x.clone()
    sparsekern.inplace_softmax(x_sm)
    _assert_close(x_sm, _ref_softmax(x.double(), -1), dtype)

    y = torch.softmax(randn(rows, cols, dtype=torch.float64), -1).to(dtype=dtype, device=device)
    g = randn(rows, cols, dtype=dtype, device=device)
    y64, g64 = y.double(), g.double()
    ref = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True))
    sparsekern.inplace_softmax_backward(g, y)
    err = (g.double() - ref).norm() / (y64 * g64).norm()
    assert err <= 2 * _tol(dtype), f"{err:.3e}"

    xn = (randn(rows, cols, dtype=torch.float64) + 3).to(dtype=dtype, device=device)
    w, b = randn(cols, dtype=dtype, device=device), randn(cols, dtype=dtype, device=device)
    ln_ref, rms_ref = _norm_refs(xn.double(), w.double(), b.double(), 1e-5)
    ln, rms, plain = xn.clone(), xn.clone(), xn.clone()
    sparsekern.inplace_layer_norm(ln, (cols,), w, b, eps=1e-5)
    sparsekern.inplace_rms_norm(rms, (cols,), w, eps=1e-5)
    sparsekern.inplace_layer_norm(plain, (cols,))  # no affine: no shared-memory staging
    _assert_close(ln, ln_ref, dtype)
    _assert_close(rms, rms_ref, dtype)
    _assert_close(plain, F.layer_norm(xn.double(), (cols,)), dtype)


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("cols", [264, 1032, 4096])
def test_warp_rows_many_rows(device, dtype, cols):
    """More rows than warps resident on an H200: every warp handles several rows (register path:
    prefetches the next one; bulk path: reuses each buffer of its ring). CPU: a few rows suffice."""
    # CUDA: enough rows that every warp goes several times around its ring of row buffers on sm_90
    # (bulk_rows.cuh: 2-8 buffers per warp, more warps resident for short rows).
    rows = {264: 80000, 1032: 20000, 4096: 8000}[cols] if device.type == "cuda" else 3
    x = randn(rows, cols, dtype=dtype, device=device) * 3
    x[-1] = -math.inf  # the last row of the grid-stride loop is fully masked: zeros
    x64 = x.double()
    sparsekern.inplace_softmax(x)
    _assert_close(x, _ref_softmax(x64, -1), dtype)
    assert torch.all(x[-1] == 0)

    xn = randn(rows, cols, dtype=dtype, device=device) + 100  # large mean: two-pass variance
    w = randn(cols, dtype=dtype, device=device)
    ref = F.layer_norm(xn.double(), (cols,), w.double(), None)
    sparsekern.inplace_layer_norm(xn, (cols,), w)
    _assert_close(xn, ref, dtype)


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("cols", [1024, 4096])
def test_warp_rows_norm_shifted_stats(device, dtype, cols):
    """The 16-bit warp-row norms take mean and variance from one pass shifted by the row's first
    element: a first element far out (an outlier), rows with a large common offset and a constant
    row (variance exactly 0: the output is the bias) stay right against float64."""
    rows = 6
    x = randn(rows, cols, dtype=torch.float64)
    x[0, 0] = 3000.0  # the shift is an extreme outlier
    x[1] += 500.0  # large offset, small spread
    x[2, 0] = -200.0
    x[3] = 7.0  # constant row
    x = x.to(dtype=dtype, device=device)
    w, b = randn(cols, dtype=dtype, device=device), randn(cols, dtype=dtype, device=device)
    ln_ref, rms_ref = _norm_refs(x.double(), w.double(), b.double(), 1e-5)
    ln, rms = x.clone(), x.clone()
    sparsekern.inplace_layer_norm(ln, (cols,), w, b, eps=1e-5)
    sparsekern.inplace_rms_norm(rms, (cols,), w, eps=1e-5)
    for r in range(rows):  # row by row: each row's own scale
        _assert_close(ln[r], ln_ref[r], dtype)
        _assert_close(rms[r], rms_ref[r], dtype)
    assert torch.equal(ln[3], b)


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_warp_rows_views(device, dtype):
    """A row stride larger than the row (warp path: stride a multiple of 8) leaves the gaps alone;
    a view starting one element in (not 16-byte aligned) takes the block tile and is right too."""
    base = torch.full((6, 1040), math.nan, dtype=dtype, device=device)
    src = randn(6, 1024, dtype=dtype, device=device)
    base[:, :1024] = src
    v = base[:, :1024]
    sparsekern.inplace_softmax(v)
    _assert_close(v, _ref_softmax(src.double(), -1), dtype)
    assert torch.isnan(base[:, 1024:]).all()

    base = torch.full((6 * 1024 + 1,), math.nan, dtype=dtype, device=device)
    v = base[1:].view(6, 1024)
    v.copy_(src)
    w = randn(1024, dtype=dtype, device=device)
    sparsekern.inplace_rms_norm(v, (1024,), w, eps=1e-5)
    ref = src.double() * torch.rsqrt(src.double().pow(2).mean(-1, keepdim=True) + 1e-5) * w.double()
    _assert_close(v, ref, dtype)
    assert torch.isnan(base[0])


@pytest.mark.cuda
def test_warp_rows_register_path_without_bulk_copies():
    """SPARSEKERN_INPLACE_BULK=0 (read once per process, so in a subprocess) keeps the register-only
    warp-row kernels on sm_90 too, the path other GPUs take: still right against float64."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    code = (
        "import math, torch, torch.nn.functional as F, sparsekern\n"
        "g = torch.Generator(device='cuda').manual_seed(0)\n"
        "worst = 0.0\n"
        "for dt in (torch.float16, torch.bfloat16):\n"
        "    for rows, cols in ((3000, 264), (2000, 1032), (700, 4096)):\n"
        "        x = torch.randn(rows, cols, device='cuda', generator=g).to(dt) * 3\n"
        "        x[0, ::5] = -math.inf\n"
        "        ref = torch.softmax(x.double(), -1)\n"
        "        sparsekern.inplace_softmax(x)\n"
        "        worst = max(worst, ((x.double() - ref).norm() / ref.norm()).item())\n"
        "        xn = torch.randn(rows, cols, device='cuda', generator=g).to(dt) + 50\n"
        "        w = torch.randn(cols, device='cuda', generator=g).to(dt)\n"
        "        b = torch.randn(cols, device='cuda', generator=g).to(dt)\n"
        "        ref = F.layer_norm(xn.double(), (cols,), w.double(), b.double())\n"
        "        sparsekern.inplace_layer_norm(xn, (cols,), w, b)\n"
        "        worst = max(worst, ((xn.double() - ref).norm() / ref.norm()).item())\n"
        "print('worst', worst)\n"
    )
    out = run_python(code, timeout=300, SPARSEKERN_INPLACE_BULK="0")
    assert out.returncode == 0, out.stdout + out.stderr
    worst = float(out.stdout.split("worst")[-1])
    assert worst <= 1e-2, out.stdout
