"""The native module's argument handling, called directly (CuPy / JAX users and C++-minded callers
pass DLPack capsules straight to sparsekern._C): arrays passed as optional arguments live as long as
the call even when an inline capsule is their only owner, outputs may not be broadcast views or
share memory with inputs, index sets need their companions, a workspace is one contiguous run.
Each case here crashed, wrote outside its output or returned a wrong result before session 28 (found
by calling every native op with unusual arrays in subprocesses)."""
from __future__ import annotations

import time

import pytest
import torch

import sparsekern as sk
from sparsekern import _C
from sparsekern._core import as_dlpack as d
from sparsekern.testing import rel_error


def _bsr_pattern():
    """A 2 × 2 block pattern of blocks of 16 (blocks (0,1), (1,0), (1,1)): its index sets (int32) and
    values (float32)."""
    i32 = torch.int32
    sets = dict(row_offsets=torch.tensor([0, 1, 3], dtype=i32), col_indices=torch.tensor([1, 0, 1], dtype=i32),
                row_indices=torch.tensor([0, 1, 1], dtype=i32), col_offsets=torch.tensor([0, 1, 3], dtype=i32),
                rows_by_col=torch.tensor([1, 0, 1], dtype=i32), blocks_by_col=torch.tensor([1, 0, 2], dtype=i32))
    values = torch.randn(3, 16, 16)
    dense = torch.zeros(32, 32, dtype=torch.float64)
    for e, (r, c) in enumerate([(0, 1), (1, 0), (1, 1)]):
        dense[16 * r:16 * r + 16, 16 * c:16 * c + 16] = values[e].double()
    return sets, values, dense


def test_inline_capsules_of_optional_arguments_live_through_the_call():
    """Temporaries whose capsule is their only owner, passed to the nb::object arguments (weights,
    biases, index sets, row sums, workspaces): the results match float64, every time (before, the
    array behind such a capsule was freed before the kernel read or wrote it)."""
    torch.manual_seed(0)
    for _ in range(20):
        x = torch.randn(4, 64)
        ref = torch.nn.functional.layer_norm(x.double(), (64,)) * 2 + 1
        _C.inplace_layer_norm(d(x), 1, d(torch.full((64,), 2.0)), d(torch.ones(64)), 1e-5)
        assert rel_error(x, ref) <= 1e-5
        x = torch.randn(3, 64)
        ref = torch.nn.functional.rms_norm(x.double(), (64,), eps=1e-5) * 3
        _C.inplace_rms_norm(d(x), 1, d(torch.full((64,), 3.0)), 1e-5)
        assert rel_error(x, ref) <= 1e-5
        x, w = torch.randn(5, 8), torch.randn(8, 8)
        ref = x.double() @ w.double() + 1
        _C.square_matmul(d(x), d(w), False, d(torch.ones(8)), False, True, d(torch.empty(256, dtype=torch.uint8)))
        assert rel_error(x, ref) <= 1e-5

        sets, values, dense = _bsr_pattern()
        a = torch.randn(7, 32)
        out = torch.empty(7, 32)
        _C.bsr_dds(d(a), d(values), 32, 32, 16, d(sets["row_offsets"].clone()), d(sets["col_indices"].clone()),
                   d(sets["col_offsets"].clone()), d(sets["rows_by_col"].clone()), d(sets["blocks_by_col"].clone()),
                   False, d(torch.full((32,), 0.5)), d(out))
        assert rel_error(out, a.double() @ dense + 0.5) <= 1e-5
        a, b = torch.randn(32, 9), torch.randn(9, 32)
        got = torch.empty(3, 16, 16)
        sums = torch.empty(32)
        _C.bsr_sdd(d(a), d(b), 32, 32, 16, d(sets["row_indices"].clone()), d(sets["col_indices"].clone()), d(got),
                   block_row_offsets=d(sets["row_offsets"].clone()), a_row_sums=d(sums))
        prod = a.double() @ b.double()
        want = torch.stack([prod[16 * r:16 * r + 16, 16 * c:16 * c + 16] for r, c in [(0, 1), (1, 0), (1, 1)]])
        assert rel_error(got, want) <= 1e-5 and rel_error(sums, a.double().sum(1)) <= 1e-5


def test_validate_needs_the_companion_sets():
    """bsr_validate with an offsets or coordinate array but not the arrays it indexes: a clear error
    (it dereferenced the missing array: a segfault)."""
    sets, _, _ = _bsr_pattern()
    with pytest.raises(ValueError, match="`block_row_offsets` needs `block_col_indices`"):
        _C.bsr_validate(3, 32, 32, 16, d(sets["row_offsets"]), None, None, None, None, None)
    with pytest.raises(ValueError, match="`block_row_indices` needs `block_col_indices`"):
        _C.bsr_validate(3, 32, 32, 16, None, None, d(sets["row_indices"]), None, None, None)
    with pytest.raises(ValueError, match="`block_col_offsets` needs"):
        _C.bsr_validate(3, 32, 32, 16, None, None, None, d(sets["col_offsets"]), None, d(sets["blocks_by_col"]))
    _C.bsr_validate(3, 32, 32, 16, *(d(sets[k]) for k in ("row_offsets", "col_indices", "row_indices",
                                                              "col_offsets", "rows_by_col", "blocks_by_col")))


def test_square_matmul_workspace_is_one_contiguous_run():
    """A strided or broadcast workspace view: refused (its byte count covered memory outside the
    view, which the op wrote)."""
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    big = torch.full((100,), 7.0)
    for ws in (big[50:51].expand(32), big[10:90:2], big[:80].view(8, 10)[:, :4]):
        with pytest.raises(ValueError, match="`workspace` must be a contiguous 1-D tensor"):
            _C.square_matmul(d(x), d(w), False, None, False, True, d(ws))
    assert (big == 7.0).all()


@pytest.mark.parametrize("op", ["softmax", "layer_norm", "softmax_backward", "square_matmul"])
def test_in_place_ops_refuse_broadcast_views(op):
    """An in-place op on a broadcast view applied the row op again to what an earlier index wrote
    (softmax of [1, 2, 3] came out [0.32, 0.33, 0.35]): refused, naming the argument."""
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]]).expand(4, 4)
    with pytest.raises(ValueError, match="must not be a broadcast view"):
        if op == "softmax":
            _C.inplace_softmax(d(x), 1)
        elif op == "layer_norm":
            _C.inplace_layer_norm(d(x), 1, None, None, 1e-5)
        elif op == "softmax_backward":
            _C.inplace_softmax_backward(d(x), d(torch.softmax(torch.randn(4, 4), 1)), 1)
        else:
            _C.square_matmul(d(x), d(torch.randn(4, 4)), False, None, False, True, None)


def test_outputs_must_not_overlap_inputs():
    """An output one row past an input in one buffer (not the same pointer, which was caught before):
    refused for the block-sparse and CSR products too (they returned wrong values)."""
    sets, values, _ = _bsr_pattern()
    buf = torch.randn(17, 32)
    with pytest.raises(ValueError, match="`out` must not share memory with `a`"):
        _C.bsr_dds(d(buf[:16]), d(values), 32, 32, 16, d(sets["row_offsets"]), d(sets["col_indices"]),
                   d(sets["col_offsets"]), d(sets["rows_by_col"]), d(sets["blocks_by_col"]), False, None, d(buf[1:]))
    buf = torch.randn(33, 8)
    with pytest.raises(ValueError, match="`out` must not share memory with `b`"):
        _C.bsr_dsd(d(values), 32, 32, 16, d(sets["row_offsets"]), d(sets["col_indices"]), d(sets["col_offsets"]),
                   d(sets["rows_by_col"]), d(sets["blocks_by_col"]), False, d(buf[:32]), d(buf[1:]))
    crow, col = torch.tensor([0, 1, 2]), torch.tensor([0, 1])
    buf = torch.randn(3, 4)
    with pytest.raises(ValueError, match="`out` must not share memory with `b`"):
        _C.CsrSpmmPlan(d(crow), d(col), d(torch.ones(2)), 2, 2, d(buf[:2]), d(buf[1:]), False)


def _sliced(base, offset=0):
    """A (3, 3, 3, 8) view of `base` whose row dims cannot merge (strides 400, 100, 20): the binding
    covers it with one library call per leading index (three slices of 400 elements' reach)."""
    return base.as_strided((3, 3, 3, 8), (400, 100, 20, 1), offset)


def test_softmax_backward_refuses_y_overlapping_another_slice_of_grad():
    """y one slice behind grad in one buffer: each slice's pair is disjoint, so the per-slice check of
    the library let it through, and slice 1 read the y that slice 0 had just overwritten (a wrong
    gradient, silently). Refused on the whole arrays, before anything is written."""
    base = torch.rand(1600)
    grad, y = _sliced(base, 400), _sliced(base, 0)
    before = base.clone()
    with pytest.raises(ValueError, match="`grad` must not share memory with `y`"):
        _C.inplace_softmax_backward(d(grad), d(y), 3)
    assert torch.equal(base, before)


@pytest.mark.parametrize("arg", ["weight", "bias"])
def test_norm_refuses_a_vector_inside_a_later_slice_of_x(arg):
    """A weight (or bias) inside the last slice of x: the library refused only at that slice, after
    the first two were normalised; now the call is refused with x untouched."""
    base = torch.randn(1200)
    x = _sliced(base)
    vec = base[800:808]
    before = base.clone()
    with pytest.raises(ValueError, match=f"`x` must not share memory with `{arg}`"):
        if arg == "weight":
            _C.inplace_layer_norm(d(x), 1, d(vec), None, 1e-5)
        else:
            _C.inplace_layer_norm(d(x), 1, None, d(vec), 1e-5)
    assert torch.equal(base, before)


@pytest.mark.parametrize("arg", ["w", "bias", "workspace"])
def test_square_matmul_refuses_operands_inside_a_later_slice_of_x(arg):
    """w, bias or workspace inside x's last slice ((3, 3, 8) at strides (100, 20, 1): three library
    calls): refused before the first slice is multiplied."""
    base = torch.randn(400)
    x = base.as_strided((3, 3, 8), (100, 20, 1), 0)
    w, bias, ws = torch.randn(8, 8), None, None
    if arg == "w":
        w = base.as_strided((8, 8), (8, 1), 205)
    elif arg == "bias":
        bias = base[210:218]
    else:
        ws = base.view(torch.uint8)[800:1000]
    before = base.clone()
    with pytest.raises(ValueError, match=f"`(x|workspace)` must not share memory with `(x|{arg})`"):
        _C.square_matmul(d(x), d(w), False, None if bias is None else d(bias), False, True,
                         None if ws is None else d(ws))
    assert torch.equal(base, before)


@pytest.mark.parametrize("op", ["softmax", "layer_norm", "softmax_backward", "square_matmul"])
def test_in_place_ops_refuse_overlapping_rows(op):
    """Rows that share elements (a sliding window, as unfold makes): each row op read values an
    earlier row had overwritten. Refused, with the array unchanged."""
    base = torch.randn(40)
    x = base.as_strided((6, 8), (4, 1))
    before = base.clone()
    with pytest.raises(ValueError, match="must not reach an element twice"):
        if op == "softmax":
            _C.inplace_softmax(d(x), 1)
        elif op == "layer_norm":
            _C.inplace_layer_norm(d(x), 1, None, None, 1e-5)
        elif op == "softmax_backward":
            _C.inplace_softmax_backward(d(x), d(torch.softmax(torch.randn(6, 8), 1)), 1)
        else:
            _C.square_matmul(d(x), d(torch.randn(8, 8)), False, None, False, True, None)
    assert torch.equal(base, before)


def test_in_place_ops_take_permuted_and_sliced_views():
    """The overlap checks refuse nothing torch's views make: permuted, transposed and stepped views
    (several library calls each) match float64."""
    torch.manual_seed(1)
    views = (lambda t: t.permute(2, 0, 1, 3), lambda t: t[::2, :, 1::2], lambda t: t.transpose(0, 2)[:, 1:])
    for view in views:
        x = view(torch.randn(6, 5, 4, 16))
        ref = torch.softmax(x.double(), -1)
        _C.inplace_softmax(d(x), 3)
        assert rel_error(x, ref) <= 1e-6

        g, y = view(torch.randn(6, 5, 4, 16)), torch.softmax(torch.randn(6, 5, 4, 16), -1)
        y = view(y)
        ref = y.double() * (g.double() - (g.double() * y.double()).sum(-1, keepdim=True))
        _C.inplace_softmax_backward(d(g), d(y), 3)
        assert rel_error(g, ref) <= 1e-5

        x, w = view(torch.randn(6, 5, 4, 16)), torch.randn(16, 16)
        ref = x.double() @ w.double()
        _C.square_matmul(d(x), d(w), False, None, False, True, d(torch.empty(256, dtype=torch.uint8)))
        assert rel_error(x, ref) <= 1e-5


@pytest.mark.parametrize("family", ["matmul", "bsr.dds", "kron_matmul", "inplace_softmax"])
def test_long_cpu_ops_let_other_python_threads_run(family):
    """The bindings held the GIL for the whole native call: another Python thread stalled for all of
    a long CPU kernel (86 ms for a matmul). Counts the main thread's loop turns while a worker
    thread is inside the op: with the GIL held there the count stays at about one."""
    import threading

    torch.manual_seed(0)
    d = torch.float64
    if family == "matmul":
        a, b = torch.randn(700, 700, dtype=d), torch.randn(700, 700, dtype=d)
        op = lambda: sk.matmul(a, b)  # noqa: E731
    elif family == "bsr.dds":
        s = sk.BlockSparseMatrix.random((1024, 1024), 32, 1.0, dtype=d)
        x = torch.randn(600, 1024, dtype=d)
        op = lambda: sk.bsr.dds(x, s)  # noqa: E731
    elif family == "kron_matmul":
        x = torch.randn(3000, 4096, dtype=d)
        fs = [torch.randn(64, 64, dtype=d), torch.randn(64, 64, dtype=d)]
        op = lambda: sk.kron_matmul(x, fs)  # noqa: E731
    else:
        x = torch.randn(4000, 4096, dtype=d)
        op = lambda: sk.inplace_softmax(x)  # noqa: E731
    op()  # first-call setup outside the measured window
    inside = threading.Event()
    done = threading.Event()

    def worker():
        for _ in range(3):
            inside.set()
            op()
        inside.clear()
        done.set()

    th = threading.Thread(target=worker)
    turns = 0
    th.start()
    inside.wait()
    while not done.is_set():
        if inside.is_set():
            turns += 1
        time.sleep(0.0005)
    th.join()
    assert turns >= 10, turns



def _read_only(t):
    """A read-only NumPy view of a CPU tensor (what np.frombuffer of bytes or a read-only memmap gives)."""
    a = t.detach().numpy()
    a.setflags(write=False)
    return a


def test_read_only_operands_are_taken_and_read_only_outputs_refused_by_name():
    """Arrays the op only reads may be flagged read-only (a read-only NumPy array); an array it
    writes must be writable, else ValueError naming it before anything runs (nothing written), and
    an output that is no array is a TypeError naming it."""
    np = pytest.importorskip("numpy")
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 7, generator=g, dtype=torch.float64), torch.randn(7, 3, generator=g, dtype=torch.float64)
    out = np.full((5, 3), np.nan)
    _C.gemm(_read_only(a), _read_only(b), out)
    np.testing.assert_allclose(out, (a @ b).numpy(), rtol=1e-12)
    ro_out = _read_only(torch.zeros(5, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="`out` is read-only"):
        _C.gemm(_read_only(a), _read_only(b), ro_out)
    assert not ro_out.any()
    with pytest.raises(TypeError, match="`out` must be an array"):
        _C.gemm(_read_only(a), _read_only(b), "out")
    with pytest.raises(ValueError, match="`out` is read-only"):
        _C.transpose(_read_only(a), _read_only(torch.zeros(7, 5, dtype=torch.float64)))

    # kron: x and the factors read-only; ∂ℓ/∂x and ∂ℓ/∂F written.
    x, f1, f2 = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((3, 6), (2, 4), (3, 5)))
    def alloc(n):  # the workspace, from the caller (see _C.kron_matmul's doc)
        buf = np.empty(n, np.uint8)
        return buf.ctypes.data, n, buf

    y = np.zeros((3, 20))
    _C.kron_matmul(_read_only(x), [_read_only(f1), _read_only(f2)], y, alloc)
    np.testing.assert_allclose(y, (x @ torch.kron(f1, f2)).numpy(), rtol=1e-12)
    gy = _read_only(torch.randn(3, 20, generator=g, dtype=torch.float64))
    gx, gf1, gf2 = np.zeros((3, 6)), np.zeros((2, 4)), np.zeros((3, 5))
    _C.kron_matmul_backward(_read_only(x), [_read_only(f1), _read_only(f2)], gy, gx, [gf1, gf2], alloc)
    xt, f1t, f2t = (t.clone().requires_grad_() for t in (x, f1, f2))
    (xt @ torch.kron(f1t, f2t)).backward(torch.from_numpy(gy.copy()))
    for got, want in ((gx, xt.grad), (gf1, f1t.grad), (gf2, f2t.grad)):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-10)
    with pytest.raises(ValueError, match="`grad_x` is read-only"):
        _C.kron_matmul_backward(_read_only(x), [_read_only(f1), _read_only(f2)], gy, _read_only(torch.zeros(3, 6)),
                                [None, None])
    with pytest.raises(ValueError, match=r"`grad_factors\[1\]` is read-only"):
        _C.kron_matmul_backward(_read_only(x), [_read_only(f1), _read_only(f2)], gy, None,
                                [gf1, _read_only(torch.zeros(3, 5, dtype=torch.float64))])

    # In place: the array rewritten must be writable; softmax_backward's y is only read.
    z = torch.randn(4, 6, generator=g, dtype=torch.float64)
    ro_z = _read_only(z.clone())
    with pytest.raises(ValueError, match="`x` is read-only"):
        _C.inplace_softmax(ro_z, 1)
    np.testing.assert_array_equal(ro_z, z.numpy())
    sm = torch.softmax(z, 1)
    grad = torch.randn(4, 6, generator=g, dtype=torch.float64)
    gnp = grad.numpy().copy()
    _C.inplace_softmax_backward(gnp, _read_only(sm), 1)
    want = sm * (grad - (grad * sm).sum(1, keepdim=True))
    np.testing.assert_allclose(gnp, want.numpy(), rtol=1e-12)

    # bsr: index sets read-only (validation), out_values of sdd written.
    off, col = torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([1, 0], dtype=torch.int32)
    _C.bsr_validate(2, 8, 8, 4, _read_only(off), _read_only(col), None, None, None, None)
    with pytest.raises(ValueError, match="`out_values` is read-only"):
        _C.bsr_sdd(_read_only(torch.zeros(8, 8)), _read_only(torch.zeros(8, 8)), 8, 8, 4,
                   _read_only(torch.tensor([0, 1], dtype=torch.int32)), _read_only(col),
                   _read_only(torch.zeros(2, 4, 4)))
