"""CSR products: csr_matmul, csr_sddmm, SparseLinear, plan caching and bad input (CPU and CUDA)."""
from __future__ import annotations

import pytest
import torch

import sparsekern as sk
from sparsekern import csr as skcsr
from sparsekern.testing import randn, rel_error, tolerance

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


def r64(*shape):
    return randn(*shape, dtype=torch.float64)


def make_csr(rows, cols, density, *, dtype=torch.float64, device="cpu", index_dtype=torch.int64,
             empty_rows=(), single=False):
    """A random CSR matrix and its float64 dense copy (after rounding to `dtype`)."""
    dense = randn(rows, cols, dtype=torch.float64)
    if single:
        mask = torch.zeros(rows, cols, dtype=torch.bool)
        if rows * cols:
            mask[rows // 2, cols // 3] = True
    else:
        mask = torch.rand(rows, cols) < density
    for r in empty_rows:
        mask[r] = False
    dense = (dense * mask).to(dtype)
    a = skcsr._from_mask(dense.to(device), mask.to(device), index_dtype)
    sk.CSRMatrix(a.crow_indices, a.col_indices, a.values, a.shape)  # structure check
    return a, dense.double().to(device)


# (m, k, n, density, options): ones, primes, non-multiples of tiles, empty rows, a single
# non-zero, fully dense, no non-zero at all, and empty dims.
CASES = [
    (1, 1, 1, 1.0, {}),
    (37, 53, 29, 0.1, {}),
    (67, 130, 33, 0.3, {"empty_rows": (0, 5, 66)}),
    (31, 17, 5, 0.0, {"single": True}),
    (19, 23, 7, 1.0, {}),
    (13, 11, 6, 0.0, {}),
    (0, 5, 4, 0.5, {}),
    (6, 0, 4, 0.5, {}),
    (6, 5, 0, 0.5, {}),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}-d{c[3]}")
def test_csr_matmul(device, dtype, case):
    m, k, n, density, opts = case
    a, a64 = make_csr(m, k, density, dtype=dtype, device=device, **opts)
    b = randn(k, n, dtype=dtype, device=device)
    out = sk.csr_matmul(a, b)
    assert out.shape == (m, n) and out.dtype == dtype and out.device.type == device.type
    assert rel_error(out, a64 @ b.double()) <= tolerance(dtype)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=["i32", "i64"])
@pytest.mark.parametrize("layout", ["batched", "batched4d", "transposed", "sliced", "torch_csr"])
def test_csr_matmul_layouts(device, index_dtype, layout):
    a, a64 = make_csr(41, 29, 0.2, dtype=torch.float32, device=device, index_dtype=index_dtype, empty_rows=(3,))
    if layout == "batched":
        b = randn(3, 29, 13, dtype=torch.float32, device=device)
    elif layout == "batched4d":
        b = randn(2, 3, 29, 13, dtype=torch.float32, device=device)
    elif layout == "transposed":
        b = randn(13, 29, dtype=torch.float32, device=device).mT
    elif layout == "sliced":
        b = randn(29, 26, dtype=torch.float32, device=device)[:, ::2]
    else:
        b = randn(29, 13, dtype=torch.float32, device=device)
        a = a.to_torch()
    out = sk.csr_matmul(a, b)
    assert rel_error(out, a64 @ b.double()) <= tolerance(torch.float32)


def test_csr_matmul_poisoned_output(device):
    """Every output element is written (rows without entries included), NaN in `out` never read."""
    a, a64 = make_csr(29, 17, 0.15, dtype=torch.float32, device=device, empty_rows=(0, 7, 28))
    for b, out in ((randn(17, 11, device=device), torch.full((29, 11), float("nan"), device=device)),
                   (randn(4, 17, 11, device=device), torch.full((4, 29, 11), float("nan"), device=device)),
                   (randn(17, 11, device=device), torch.full((11, 29), float("nan"), device=device).mT)):
        skcsr._spmm_into(a.crow_indices, a.col_indices, a.values, 29, 17, b, out, False)
        assert rel_error(out, a64 @ b.double()) <= tolerance(torch.float32)
    # no stored entries at all: the output is all zeros, still written
    e, _ = make_csr(9, 8, 0.0, device=device)
    out = torch.full((9, 5), float("nan"), dtype=torch.float64, device=device)
    skcsr._spmm_into(e.crow_indices, e.col_indices, e.values, 9, 8, randn(8, 5, device=device, dtype=torch.float64),
                     out, False)
    assert (out == 0).all()


def test_csr_sddmm_poisoned_output(device):
    a, a64 = make_csr(23, 19, 0.2, dtype=torch.float32, device=device, empty_rows=(4,))
    x, y = randn(23, 7, device=device), randn(7, 19, device=device)
    out = torch.full((a.nnz,), float("nan"), device=device)
    skcsr._sddmm_into(a.crow_indices, a.col_indices, 23, 19, x, y, out)
    ref = (x.double() @ y.double())[a64 != 0]
    assert rel_error(out, ref) <= tolerance(torch.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("shape", [(1, 1, 1), (37, 5, 29), (24, 64, 33), (7, 3, 0)], ids=str)
def test_csr_sddmm(device, dtype, shape):
    m, t, n = shape
    pattern, p64 = make_csr(m, n, 0.25, dtype=dtype, device=device, empty_rows=(0,) if m > 1 else ())
    x, y = randn(m, t, dtype=dtype, device=device), randn(t, n, dtype=dtype, device=device)
    out = sk.csr_sddmm(x, y, pattern)
    assert isinstance(out, sk.CSRMatrix) and out.nnz == pattern.nnz
    ref = (x.double() @ y.double())[p64 != 0] if pattern.nnz else torch.zeros(0, dtype=torch.float64)
    assert rel_error(out.values, ref.to(device)) <= tolerance(dtype)
    # torch sparse_csr in, torch sparse_csr out; transposed (column-major) operands
    out2 = sk.csr_sddmm(x.mT.contiguous().mT, y.mT.contiguous().mT, pattern.to_torch())
    assert out2.layout == torch.sparse_csr
    assert rel_error(out2.values(), ref.to(device)) <= tolerance(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("batched", [False, True], ids=["2d", "batched"])
def test_csr_matmul_backward(device, dtype, batched):
    a, a64 = make_csr(27, 19, 0.2, dtype=dtype, device=device, empty_rows=(2,))
    values = a.values.clone().requires_grad_()
    b = randn(*((3,) if batched else ()), 19, 11, dtype=dtype, device=device).requires_grad_()
    out = sk.csr_matmul(a.with_values(values), b)
    g = randn(*out.shape, dtype=dtype, device=device)
    gv, gb = torch.autograd.grad(out, (values, b), g)
    # float64 reference through torch's dense product with the pattern as a mask
    mask = a64 != 0
    dense = torch.zeros(27, 19, dtype=torch.float64, device=device)
    v64 = a.values.double().requires_grad_()
    dense = dense.masked_scatter(mask, v64)
    b64 = b.detach().double().requires_grad_()
    ref = dense @ b64
    rv, rb = torch.autograd.grad(ref, (v64, b64), g.double())
    tol = tolerance(dtype) * 2  # one more rounding: the gradient's inputs are themselves rounded
    assert rel_error(gv, rv) <= tol
    assert rel_error(gb, rb) <= tol


def test_csr_matmul_grad_into_torch_sparse(device):
    a, a64 = make_csr(12, 9, 0.3, device=device)
    t = a.to_torch().detach().requires_grad_()
    b = randn(9, 4, device=device, dtype=torch.float64)
    g = randn(12, 4, device=device, dtype=torch.float64)
    sk.csr_matmul(t, b).backward(g)
    ref = (g @ b.mT)[a64 != 0]
    assert t.grad is not None and t.grad.layout == torch.sparse_csr
    assert rel_error(t.grad.values(), ref) <= tolerance(torch.float64)


def test_csr_gradcheck():
    a, _ = make_csr(7, 6, 0.4, empty_rows=(1,))
    values = a.values.clone().requires_grad_()
    for b in (r64(6, 5).requires_grad_(), r64(2, 6, 5).requires_grad_(),
              r64(5, 6).mT.requires_grad_()):
        assert torch.autograd.gradcheck(lambda v, bb: sk.csr_matmul(a.with_values(v), bb), (values, b))
    assert torch.autograd.gradgradcheck(lambda v, bb: sk.csr_matmul(a.with_values(v), bb),
                                        (values, r64(6, 3).requires_grad_()))
    x, y = r64(7, 4).requires_grad_(), r64(4, 6).requires_grad_()
    assert torch.autograd.gradcheck(lambda xx, yy: sk.csr_sddmm(xx, yy, a).values, (x, y))


def test_sparse_linear_gradcheck():
    lin = torch.nn.Linear(10, 7, dtype=torch.float64)
    sl = sk.SparseLinear.from_dense(lin, 0.4)
    x = r64(3, 2, 10).requires_grad_()

    def f(xx, v, bias):
        return torch.func.functional_call(sl, {"values": v, "bias": bias}, (xx,))

    v = sl.values.detach().clone().requires_grad_()
    bias = sl.bias.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(f, (x, v, bias))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_sparse_linear(device, dtype):
    lin = torch.nn.Linear(37, 23, device=device, dtype=dtype)
    sl = sk.SparseLinear.from_dense(lin, 0.15)
    assert sl.in_features == 37 and sl.out_features == 23
    assert "density" in repr(sl)
    w = sl.weight.to_dense()
    # the kept entries are the largest magnitudes of the dense weight
    kept = lin.weight.detach().abs()[w != 0]
    dropped = lin.weight.detach().abs()[w == 0]
    assert kept.min() >= dropped.max()
    x = randn(4, 5, 37, dtype=dtype, device=device).requires_grad_()
    y = sl(x)
    ref_x = x.detach().double().requires_grad_()
    w64 = w.double().requires_grad_()
    b64 = sl.bias.detach().double().requires_grad_()
    ref = torch.nn.functional.linear(ref_x, w64, b64)
    assert rel_error(y, ref) <= tolerance(dtype)
    g = randn(*y.shape, dtype=dtype, device=device)
    y.backward(g)
    rx, rw, rb = torch.autograd.grad(ref, (ref_x, w64, b64), g.double())
    tol = tolerance(dtype) * 2
    assert rel_error(x.grad, rx) <= tol
    assert rel_error(sl.values.grad, rw[w != 0]) <= tol
    assert rel_error(sl.bias.grad, rb) <= tol


def test_sparse_linear_init(device):
    sl = sk.SparseLinear(64, 32, bias=False, density=0.25, device=device)
    assert sl.bias is None and sl.nnz == 512
    assert sl(randn(3, 64, device=device)).shape == (3, 32)
    with pytest.raises(ValueError, match="density"):
        sk.SparseLinear(8, 8, density=0.0)
    with pytest.raises(ValueError, match="input"):
        sl(randn(3, 63, device=device))
    with pytest.raises(TypeError, match="linear"):
        sk.SparseLinear.from_dense(torch.nn.Conv1d(2, 2, 1), 0.5)


def test_plans_cached(device):
    """After the first call: no planning (bufferSize, preprocess, plan creation), no allocation,
    no structure check, whatever the number of calls, new values or new dense operands."""
    a, a64 = make_csr(64, 48, 0.1, dtype=torch.float32, device=device)
    values = a.values.clone().requires_grad_()
    b = randn(48, 40, device=device).requires_grad_()
    sk.csr_matmul(a.with_values(values), b).sum().backward()  # warm: forward and backward plans
    before = sk.csr_plan_stats()
    for _ in range(5):
        b2 = randn(48, 40, device=device).requires_grad_()
        out = sk.csr_matmul(a.with_values(values * 1.0), b2)  # new value and operand tensors
        out.sum().backward()
    after = sk.csr_plan_stats()
    for key in ("plans_created", "buffer_size_queries", "preprocess_calls", "workspace_allocations",
                "patterns_validated", "autotuned"):
        assert after[key] == before[key], key
    assert after["runs"] > before["runs"] and after["plan_cache_hits"] > before["plan_cache_hits"]
    assert rel_error(out, a64 @ b2.double()) <= tolerance(torch.float32)


def test_inplace_index_change_is_rechecked(device):
    a, _ = make_csr(8, 6, 0.5, device=device)
    b = randn(6, 3, device=device, dtype=torch.float64)
    sk.csr_matmul(a, b)
    a.col_indices[0] = 6  # out of range, written in place: the version counter changes
    with pytest.raises(ValueError, match="col_indices"):
        sk.csr_matmul(a, b)


# --------------------------------------------------------------------------------------------
# Bad input: every error names the argument
# --------------------------------------------------------------------------------------------
def _parts(device, index_dtype=torch.int64):
    crow = torch.tensor([0, 2, 3, 5], dtype=index_dtype, device=device)
    col = torch.tensor([0, 2, 1, 0, 3], dtype=index_dtype, device=device)
    values = randn(5, device=device, dtype=torch.float64)
    return crow, col, values


def test_bad_layouts(device):
    dense = randn(4, 4, device=device, dtype=torch.float64)
    b = randn(4, 2, device=device, dtype=torch.float64)
    for bad in (dense, dense.to_sparse(), dense.to_sparse_csc(), dense.to_sparse_bsr((2, 2))):
        with pytest.raises(ValueError, match="`a`"):
            sk.csr_matmul(bad, b)
    with pytest.raises(TypeError, match="`a`"):
        sk.csr_matmul([[1.0]], b)
    with pytest.raises(ValueError, match="`pattern`"):
        sk.csr_sddmm(b, b.mT, dense)


def test_bad_structure(device):
    crow, col, values = _parts(device)
    shape = (3, 4)
    with pytest.raises(ValueError, match="col_indices.*sorted"):
        sk.CSRMatrix(crow, torch.tensor([2, 0, 1, 0, 3], device=device), values, shape)
    with pytest.raises(ValueError, match="col_indices.*sorted"):
        sk.CSRMatrix(crow, torch.tensor([0, 0, 1, 0, 3], device=device), values, shape)  # duplicate
    with pytest.raises(ValueError, match="col_indices"):
        sk.CSRMatrix(crow, torch.tensor([0, 2, 1, 0, 4], device=device), values, shape)  # out of range
    with pytest.raises(ValueError, match="col_indices"):
        sk.CSRMatrix(crow, torch.tensor([0, 2, -1, 0, 3], device=device), values, shape)
    with pytest.raises(ValueError, match="crow_indices"):
        sk.CSRMatrix(torch.tensor([1, 2, 3, 5], device=device), col, values, shape)
    with pytest.raises(ValueError, match="crow_indices"):
        sk.CSRMatrix(torch.tensor([0, 2, 3, 4], device=device), col, values, shape)
    with pytest.raises(ValueError, match="crow_indices"):
        sk.CSRMatrix(torch.tensor([0, 3, 2, 5], device=device), col, values, shape)
    with pytest.raises(ValueError, match="crow_indices"):
        sk.CSRMatrix(crow[:-1], col, values, shape)
    with pytest.raises(ValueError, match="values"):
        sk.CSRMatrix(crow, col, values[:4], shape)
    # a torch tensor built without invariant checks is checked by the op
    unsorted = torch.sparse_csr_tensor(crow, torch.tensor([2, 0, 1, 0, 3], device=device), values, shape,
                                       check_invariants=False)
    with pytest.raises(ValueError, match="col_indices"):
        sk.csr_matmul(unsorted, randn(4, 2, device=device, dtype=torch.float64))


def test_bad_types(device):
    crow, col, values = _parts(device)
    with pytest.raises(TypeError, match="col_indices"):
        sk.CSRMatrix(crow, col.to(torch.int32), values, (3, 4))
    with pytest.raises(TypeError, match="crow_indices"):
        sk.CSRMatrix(crow.double(), col, values, (3, 4))
    with pytest.raises(TypeError, match="values"):
        sk.CSRMatrix(crow, col, values.to(torch.int64), (3, 4))
    a = sk.CSRMatrix(crow, col, values, (3, 4))
    with pytest.raises(TypeError, match="`b`"):
        sk.csr_matmul(a, randn(4, 2, device=device, dtype=torch.float32))


def test_bad_shapes(device):
    crow, col, values = _parts(device)
    a = sk.CSRMatrix(crow, col, values, (3, 4))
    with pytest.raises(ValueError, match="`b`"):
        sk.csr_matmul(a, randn(5, 2, device=device, dtype=torch.float64))
    with pytest.raises(ValueError, match="`b`"):
        sk.csr_matmul(a, randn(4, device=device, dtype=torch.float64))
    x = randn(3, 6, device=device, dtype=torch.float64)
    y = randn(6, 4, device=device, dtype=torch.float64)
    with pytest.raises(ValueError, match="`x`"):
        sk.csr_sddmm(x[:2], y, a)
    with pytest.raises(ValueError, match="`y`"):
        sk.csr_sddmm(x, y[:, :3], a)
    with pytest.raises(ValueError, match="`y`"):
        sk.csr_sddmm(x, y[:5], a)
    with pytest.raises(ValueError, match="`shape`"):
        sk.CSRMatrix(crow, col, values, (3, 4, 1))


def test_fake_tensor_errors_match():
    """register_fake raises the same errors as the real op (torch.compile sees them too)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    crow, col, values = _parts("cpu")
    mode = FakeTensorMode()
    fc, fcol, fv = mode.from_tensor(crow), mode.from_tensor(col), mode.from_tensor(values)
    with mode:
        out = skcsr._csr_mm_op(fc, fcol, fv, 3, 4, torch.empty(4, 7, dtype=torch.float64), False, True)
        assert out.shape == (7, 3)
        with pytest.raises(ValueError, match="`b`"):
            skcsr._csr_mm_op(fc, fcol, fv, 3, 4, torch.empty(5, 7, dtype=torch.float64), False, False)
        with pytest.raises(TypeError, match="col_indices"):
            skcsr._csr_mm_op(fc, fcol.int(), fv, 3, 4, torch.empty(4, 7, dtype=torch.float64), False, False)
        assert skcsr._csr_sddmm_op(fc, fcol, 3, 4, torch.empty(3, 2, dtype=torch.float64),
                                   torch.empty(2, 4, dtype=torch.float64)).shape == (5,)


def test_opcheck():
    a, _ = make_csr(6, 5, 0.5)
    b = r64(5, 3).requires_grad_()
    torch.library.opcheck(skcsr._csr_mm_op, (a.crow_indices, a.col_indices, a.values.requires_grad_(), 6, 5, b,
                                             False, False),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))
    torch.library.opcheck(skcsr._csr_sddmm_op, (a.crow_indices, a.col_indices, 6, 5, r64(6, 2), r64(2, 5)),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))


def test_sddmm_fallbacks(monkeypatch):
    """The fallbacks taken when a cuSPARSE build rejects a layout or a half type (simulated on the
    CPU): row-major copies first, then fp32; each decided once per plan key."""
    import types

    real = skcsr._C
    made = []

    def picky_plan(crow, col, rows, cols, x, y, out):
        xt, yt = torch.from_dlpack(x), torch.from_dlpack(y)
        made.append((xt.is_contiguous(), yt.is_contiguous(), xt.dtype))
        if not (xt.is_contiguous() and yt.is_contiguous()) or xt.dtype in (torch.float16, torch.bfloat16):
            raise RuntimeError("csr sddmm: this problem is not supported by cuSPARSE (simulated)")
        cap = torch.utils.dlpack.to_dlpack  # from_dlpack consumed the capsules
        return real.CsrSddmmPlan(crow, col, rows, cols, cap(xt), cap(yt), out)

    shim = types.SimpleNamespace(CsrSddmmPlan=picky_plan, CsrSpmmPlan=real.CsrSpmmPlan,
                                 csr_plan_counters=real.csr_plan_counters)
    monkeypatch.setattr(skcsr, "_C", shim)
    skcsr.csr_clear_cache()
    a, a64 = make_csr(17, 13, 0.3)
    for dtype in (torch.float16, torch.float32):
        x = randn(5, 17, dtype=dtype).mT  # column-major: rejected by the simulated cuSPARSE
        y = randn(5, 13, dtype=dtype)
        for _ in range(2):
            out = sk.csr_sddmm(x, y, a)
            ref = (x.double() @ y.double())[a64 != 0]
            assert out.values.dtype == dtype and rel_error(out.values, ref) <= tolerance(dtype)
    # fp16: strided (rejected), contiguous (rejected), fp32 contiguous (accepted); fp32: strided
    # (rejected), then the contiguous fp32 plan made above is reused. Second calls plan nothing.
    assert [m[2] for m in made] == [torch.float16, torch.float16, torch.float32, torch.float32]
    skcsr.csr_clear_cache()


def test_explicit_transpose_path(monkeypatch):
    """The CUDA route for Aᵀ·B (explicit transpose, values gathered) run on the CPU: forward of
    the transposed product, gradients, and a pattern with empty rows and empty columns."""
    monkeypatch.setattr(skcsr, "_EXPLICIT_TRANSPOSE_ON_CPU", True)
    dense = r64(9, 7)
    dense[dense.abs() < 0.6] = 0
    dense[3] = 0
    dense[:, 2] = 0
    a = sk.CSRMatrix.from_dense(dense)
    g = r64(9, 5)
    out = skcsr._csr_mm_op(a.crow_indices, a.col_indices, a.values, 9, 7, g, True, False)
    assert rel_error(out, dense.mT @ g) <= tolerance(torch.float64)
    values = a.values.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda v, bb: sk.csr_matmul(a.with_values(v), bb),
                                    (values, r64(7, 4).requires_grad_()))
    lin = sk.SparseLinear.from_dense(torch.nn.Linear(12, 6, dtype=torch.float64), 0.3)
    x = r64(4, 12).requires_grad_()
    lin(x).sum().backward()
    ref_x = x.detach().requires_grad_()
    torch.nn.functional.linear(ref_x, lin.weight.to_dense(), lin.bias).sum().backward()
    assert rel_error(x.grad, ref_x.grad) <= tolerance(torch.float64)


@pytest.mark.cuda
def test_compile_reduce_overhead():
    """SparseLinear under torch.compile(mode="reduce-overhead"): CUDA-graph trees warm the layer up
    on a stream of their own with this thread's allocations routed to their pool, where the
    pattern's plans (made per stream, with their workspaces) and int32 index copies must not come
    from (the tree then refuses the graph); forward and gradients against eager, three calls."""
    if not (torch.cuda.is_available() and sk.cuda_available()):
        pytest.skip("needs CUDA")
    dev = torch.device("cuda")
    torch.manual_seed(5)
    layer = sk.SparseLinear.from_dense(torch.nn.Linear(512, 256, device=dev), 0.1)
    compiled = torch.compile(layer, mode="reduce-overhead")
    params = [p for p in layer.parameters() if p.requires_grad]
    for _ in range(3):
        x = torch.randn(300, 512, device=dev, requires_grad=True)
        go = torch.randn(300, 256, device=dev)
        y = compiled(x)
        got = torch.autograd.grad(y, [x, *params], go)
        y = y.clone()  # the tree's output buffers are reused by the next replay
        y_e = layer(x)
        want = torch.autograd.grad(y_e, [x, *params], go)
        assert rel_error(y, y_e) <= 1e-5
        for a, w in zip(got, want):
            assert rel_error(a, w) <= 1e-5


@pytest.mark.cuda
def test_cached_pattern_tensors_across_streams():
    """A pattern's cached tensors (the transposed pattern, the int32 index copies) are made by
    kernels queued on the stream of the call that first needed them; a call on another stream that
    does not wait for that one must not read them before they exist. Here the transpose is queued
    behind a 0.2 s sleep on s1 and used at once on s2; the gradients must match float64 on both
    streams. (On the H100 this passed before the event ordering too: making the transpose
    synchronises the host incidentally, in torch.bincount, and the int32 copies follow the first
    call's structure check. The event keeps the order from depending on those syncs.)"""
    if not (torch.cuda.is_available() and sk.cuda_available()):
        pytest.skip("needs CUDA")
    dev = torch.device("cuda")
    torch.manual_seed(3)
    a, dense = make_csr(600, 400, 0.05, dtype=torch.float32, device=dev)  # int64 indices: int32 copies
    b = torch.randn(400, 64, device=dev)
    g = torch.randn(600, 64, device=dev)
    ref = dense.mT @ g.double()
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    s1.wait_stream(torch.cuda.current_stream())
    s2.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s1):
        sk.csr_matmul(a, b)  # checks the pattern (a host sync) and makes the int32 copies
        torch.cuda._sleep(400_000_000)
        bb = b.clone().requires_grad_()
        sk.csr_matmul(a, bb).backward(g)  # Aᵀ·g: the transposed pattern, queued behind the sleep
    with torch.cuda.stream(s2):
        b2 = b.clone().requires_grad_()
        sk.csr_matmul(a, b2).backward(g)
    torch.cuda.synchronize()
    assert rel_error(bb.grad, ref) <= 1e-5
    assert rel_error(b2.grad, ref) <= 1e-5


def test_pattern_cache_holds_every_live_layer(monkeypatch):
    """Each live pattern's structure is checked once, however many layers a model has: training 80
    SparseLinear layers checks their patterns on the first step and none on the next two (a 64-entry
    LRU, before session 28, re-checked them all, with host syncs, on every step); once the layers are
    gone, only the recent-patterns LRU (64) still holds any of them."""
    import gc
    monkeypatch.setattr(skcsr, "_EXPLICIT_TRANSPOSE_ON_CPU", True)  # the CUDA path's transposes
    torch.manual_seed(0)
    layers = [sk.SparseLinear(32, 24, density=0.3) for _ in range(80)]
    x = randn(5, 32, dtype=torch.float32, device="cpu")

    def step():
        loss = sum(layer(x).square().sum() for layer in layers)
        loss.backward()

    before = sk.csr_plan_stats()["patterns_validated"]
    step()
    checked = sk.csr_plan_stats()["patterns_validated"]
    assert checked - before >= 80
    step()
    step()
    assert sk.csr_plan_stats()["patterns_validated"] == checked
    idents = {(id(layer.crow_indices), id(layer.col_indices)) for layer in layers}
    assert idents <= set(skcsr._patterns)
    del layers, step
    gc.collect()
    assert len(idents & set(skcsr._patterns)) <= skcsr._MAX_RECENT


def test_pattern_cache_per_call_index_views():
    """A torch.sparse_csr tensor hands out new index tensor objects at every crow_indices() /
    col_indices() call: the pattern is found by its pointers, checked and planned once."""
    torch.manual_seed(1)
    a = (torch.randn(64, 48) * (torch.rand(64, 48) < 0.2)).to_sparse_csr()
    b = torch.randn(48, 8)
    sk.csr_matmul(a, b)
    stats = sk.csr_plan_stats()
    for _ in range(3):
        assert rel_error(sk.csr_matmul(a, b), a.to_dense().double() @ b.double()) <= tolerance(torch.float32)
    after = sk.csr_plan_stats()
    assert after["patterns_validated"] == stats["patterns_validated"]
    assert after["plans_created"] == stats["plans_created"]


def test_pattern_cache_sees_in_place_index_changes():
    """An in-place change of a pattern's index tensors (a version bump) is a new pattern: checked
    again and used, not the cached one."""
    dense = torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])
    m = sk.CSRMatrix.from_dense(dense)
    b = torch.eye(3)
    assert torch.equal(sk.csr_matmul(m, b), dense)
    with torch.no_grad():
        m.col_indices[1] = 1  # row 0's second entry moves from column 2 to column 1
    want = torch.tensor([[1.0, 2.0, 0.0], [0.0, 3.0, 0.0]])
    assert torch.equal(sk.csr_matmul(m, b), want)
    with torch.no_grad():
        m.col_indices[1] = 0  # now a repeated column: the structure check names it
    with pytest.raises(ValueError, match="col_indices"):
        sk.csr_matmul(m, b)


def test_plan_cache_is_bounded_per_pattern():
    """One plan per (pattern, batch size, strides) had no bound: a layer fed many batch sizes kept
    them all (8000 sizes: 24,000 plans). The least recently used ones go past _MAX_PLANS; results
    stay right, the evicted problems just plan again."""
    torch.manual_seed(11)
    layer = sk.SparseLinear(32, 16, density=0.5)
    w = layer.weight.to_dense().detach().double()
    limit = skcsr._MAX_PLANS
    for n in range(1, limit + 40):
        x = torch.randn(n, 32, requires_grad=True)
        layer(x).sum().backward()
    sizes = [len(p.plans) for _, p in skcsr._patterns.values()]
    assert sizes and max(sizes) <= limit
    for n in (1, limit + 39, 7):  # evicted and kept problems alike
        x = torch.randn(n, 32, dtype=torch.float32)
        ref = x.double() @ w.T + layer.bias.detach().double()
        assert (layer(x).double() - ref).abs().max() < 1e-4
