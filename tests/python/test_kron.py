"""Kronecker-factored products: kron_matmul (forward, backward, left), KronLinear, bad input.

Every body runs on the CPU and on CUDA (the `device` fixture). The CPU backend executes the GPU
block programs thread by thread, so the CPU cases also check the GPU kernels' tiling; the shapes
below are chosen to reach every kernel path: single fused groups, several groups (chunks beyond
the shared-memory budget), cuBLAS steps for factors > 64, 4- and 8-wide register tiles, odd sizes
and tails of partially filled tiles.
"""
from __future__ import annotations

import functools
import io
import math
import os

import pytest
import torch

from sparsekern import KronLinear, _C, kron_matmul
from sparsekern._core import as_dlpack
from sparsekern.kron import kron_reference, nearest_kronecker
from sparsekern.testing import capture_graph, randn, rel_error, tolerance

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]

# (batch, factor shapes): 1 to 5 factors, square and not, sizes 1, 3, 5, 7, 24, batch 1 and odd.
SMALL = [
    (1, [(5, 3)]),
    (7, [(3, 3)]),
    (3, [(2, 3), (3, 2)]),
    (5, [(3, 5), (7, 2), (2, 4)]),
    (1, [(8, 8), (8, 8)]),
    (9, [(24, 24), (5, 7)]),
    (4, [(3, 3), (4, 4), (5, 5), (2, 2), (3, 2)]),
    (6, [(7, 7), (1, 3), (3, 1)]),
    (2, [(2, 2)] * 5),
]
# Shapes whose plan has several kernels or cuBLAS steps (too big for torch.kron: v2 reference).
LARGE = [
    (3, [(16, 16)] * 4),            # 65536 columns: two fused groups
    (2, [(32, 32)] * 3),            # fused pair + single fused mode with a large outer index
    (3, [(64, 64), (64, 64)]),      # 64x64 fused (fp64 backward splits it)
    (5, [(130, 7), (3, 2)]),        # a factor > 64: cuBLAS step with an outer index
    (3, [(2, 70), (4, 3)]),         # wide factor through cuBLAS, narrow (4-wide tile) fused
    (2, [(8, 8)] * 5),
    (11, [(128, 3)]),               # single factor: one GEMM
]
GPU_ONLY = [  # the benchmark's shapes at a modest batch: vectorised paths, many tiles
    (64, [(8, 8)] * 4),
    (96, [(16, 16)] * 3),
    (33, [(32, 32)] * 2),
    (40, [(64, 64)] * 2),
    (16, [(128, 128)] * 2),
    (8, [(16, 16)] * 4),
]


def _tf32(device) -> bool:
    return device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32


def _make(batch, shapes, dtype, device, *, grad=False):
    P = math.prod(p for p, _ in shapes)
    x = randn(batch, P, dtype=dtype, device=device)
    fs = [randn(p, q, dtype=dtype, device=device) for p, q in shapes]
    if grad:
        x.requires_grad_()
        for f in fs:
            f.requires_grad_()
    return x, fs


def _poisoned_alloc(device):
    """A workspace allocator for the native calls whose buffers start as NaN bytes (0xff): a kernel
    that reads scratch it never wrote poisons its output."""
    def alloc(n):
        buf = torch.full((n,), 255, dtype=torch.uint8, device=device)
        return buf.data_ptr(), n, buf
    return alloc


def _reference(x, fs):
    """float64 reference: the explicit Kronecker product when small, else one factor at a time."""
    x64 = x.detach().double()
    f64 = [f.detach().double() for f in fs]
    P = math.prod(f.shape[0] for f in fs)
    Q = math.prod(f.shape[1] for f in fs)
    if P * Q <= 1 << 20:
        return x64 @ functools.reduce(torch.kron, f64)
    return kron_reference(x64, f64)


def _tol(dtype, device, factor=1.0):
    return tolerance(dtype, _tf32(device)) * factor


# --------------------------------------------------------------------------------------------
# Forward
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,shapes", SMALL + LARGE)
def test_forward(device, dtype, batch, shapes):
    x, fs = _make(batch, shapes, dtype, device)
    y = kron_matmul(x, fs)
    assert y.shape == (batch, math.prod(q for _, q in shapes)) and y.dtype == dtype and y.device == x.device
    assert rel_error(y, _reference(x, fs)) <= _tol(dtype, device, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch,shapes", GPU_ONLY)
def test_forward_benchmark_shapes(device, dtype, batch, shapes):
    if device.type == "cpu":
        batch = 2  # the same kernels and plan groups, fewer rows
    x, fs = _make(batch, shapes, dtype, device)
    y = kron_matmul(x, fs)
    assert rel_error(y, _reference(x, fs)) <= _tol(dtype, device, 2)


def test_forward_batch_dims_and_views(device):
    shapes = [(3, 4), (5, 2), (4, 3)]
    P = 60
    base = randn(4, 7, 2 * P, device=device)
    fs = [randn(p, q, device=device) for p, q in shapes]
    x = base[..., ::2]  # non-contiguous last dim
    y = kron_matmul(x, fs)
    assert y.shape == (4, 7, 24)
    assert rel_error(y, _reference(x, fs)) <= _tol(torch.float32, device)
    xt = randn(P, 6, device=device).mT  # transposed view (column stride ≠ 1)
    assert rel_error(kron_matmul(xt, fs), _reference(xt, fs)) <= _tol(torch.float32, device)
    ft = [randn(q, p, device=device).mT for p, q in shapes]  # transposed factors: no copy needed
    assert rel_error(kron_matmul(x, ft), _reference(x, ft)) <= _tol(torch.float32, device)
    fstrided = [randn(p, 2 * q, device=device)[:, ::2] for p, q in shapes]  # neither stride 1
    assert rel_error(kron_matmul(x, fstrided), _reference(x, fstrided)) <= _tol(torch.float32, device)
    x1 = randn(P, device=device)  # 1-D input
    assert rel_error(kron_matmul(x1, fs), _reference(x1[None], fs)[0]) <= _tol(torch.float32, device)


def test_forward_empty_batch(device):
    fs = [randn(3, 4, device=device), randn(2, 5, device=device)]
    x = torch.empty(0, 6, device=device)
    y = kron_matmul(x, fs)
    assert y.shape == (0, 20)
    x = torch.empty(2, 0, 6, device=device, requires_grad=True)
    fg = [f.clone().requires_grad_() for f in fs]
    y = kron_matmul(x, fg)
    assert y.shape == (2, 0, 20)
    y.sum().backward()
    assert x.grad.shape == x.shape
    for f in fg:  # an empty sum: exactly zero, not garbage
        assert torch.equal(f.grad, torch.zeros_like(f))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
@pytest.mark.parametrize("batch,shapes", [(5, [(3, 5), (7, 2), (2, 4)]), (3, [(16, 16)] * 4),
                                          (4, [(130, 7), (3, 2)]), (6, [(8, 8), (8, 8)])])
def test_native_writes_every_output(device, dtype, batch, shapes):
    """The native op fills caller buffers completely: poison them with NaN first."""
    x, fs = _make(batch, shapes, dtype, device)
    Q = math.prod(q for _, q in shapes)
    out = torch.full((batch, Q), float("nan"), dtype=dtype, device=device)

    alloc = _poisoned_alloc(device)
    _C.kron_matmul(as_dlpack(x), [as_dlpack(f) for f in fs], as_dlpack(out), alloc)
    ref = _reference(x, fs)
    assert rel_error(out, ref) <= _tol(dtype, device, 2)
    g = randn(batch, Q, dtype=dtype, device=device)
    gx = torch.full_like(x, float("nan"))
    gfs = [torch.full_like(f, float("nan")) for f in fs]
    _C.kron_matmul_backward(as_dlpack(x), [as_dlpack(f) for f in fs], as_dlpack(g), as_dlpack(gx),
                            [as_dlpack(t) for t in gfs], alloc)
    x64, f64 = x.double().requires_grad_(), [f.double().requires_grad_() for f in fs]
    kron_reference(x64, f64).backward(g.double())
    assert rel_error(gx, x64.grad) <= _tol(dtype, device, 4)
    for a, f in zip(gfs, f64):
        assert rel_error(a, f.grad) <= _tol(dtype, device, 4)


# --------------------------------------------------------------------------------------------
# The two fused fp32 forward kernels (SPARSEKERN_KRON_FWD=old|new; kron_fast.h for "new")
# --------------------------------------------------------------------------------------------
@pytest.fixture(params=["old", "new", "small"])
def fwd_kernel(request):
    """Runs the test under each forward kernel; "" afterwards re-reads the environment."""
    _C.kron_set_forward_kernel(request.param)
    yield request.param
    _C.kron_set_forward_kernel("")


# Shapes of the register-tile kernel's edge paths (all one fused group, every q a multiple of 4, so
# "new" takes them): rows not a multiple of the rows per tile, several tiles per block, odd p,
# q padded up to 8/16/32/64 (4, 12, 20, 24), non-square, 2 to 5 factors, p = 1, a single row.
FAST_SHAPES = [
    (1, [(8, 8), (8, 8)]),
    (7, [(3, 8), (5, 4), (7, 12)]),
    (9, [(24, 24), (5, 8)]),
    (13, [(64, 32), (64, 32)]),
    (50, [(3, 4), (4, 4), (5, 8), (2, 4), (3, 4)]),
    (3, [(8, 8), (64, 64)]),
    (2, [(1, 4), (64, 64)]),
    (33, [(16, 24), (16, 20)]),
    (9, [(64, 4), (4, 64)]),
    (61, [(8, 8)] * 4),
    (37, [(16, 16)] * 3),
    (45, [(32, 32)] * 2),
    (19, [(64, 64)] * 2),
    (6, [(7, 16), (3, 8), (5, 4), (2, 4)]),
]


def _fwd_plan(x, fs):
    return _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], False)


@pytest.mark.parametrize("batch,shapes", FAST_SHAPES)
def test_forward_kernels(device, fwd_kernel, batch, shapes):
    """fp32 forward under both kernels against float64, also through strided rows of x and an output
    whose rows are not 16-byte aligned (the register-tile kernel's scalar store path)."""
    x, fs = _make(batch, shapes, torch.float32, device)
    plan = _fwd_plan(x, fs)
    small = all(p == q and p in (4, 8, 16, 32) for p, q in shapes) and 1024 <= math.prod(p for p, _ in shapes) <= 8192
    assert ("kernel=small" in plan) == (fwd_kernel == "small" and small), plan  # "small" takes p = 32 too
    if fwd_kernel == "new":
        assert "kernel=fast" in plan
    if fwd_kernel == "old":
        assert "kernel=fast" not in plan and "kernel=small" not in plan
    ref = _reference(x, fs)
    assert rel_error(kron_matmul(x, fs), ref) <= _tol(torch.float32, device, 2)
    P, Q = x.shape[1], ref.shape[1]
    xs = randn(batch, P + 3, device=device)[:, 1:P + 1]
    buf = torch.full((batch, Q + 1), float("nan"), device=device)
    out = buf[:, 1:]  # row stride Q + 1, offset by 4 bytes: no 16-byte vectors

    def alloc(n):  # a workspace, should a device's plan split the group
        ws = torch.empty(n, dtype=torch.uint8, device=device)
        return ws.data_ptr(), n, ws

    _C.kron_matmul(as_dlpack(xs), [as_dlpack(f) for f in fs], as_dlpack(out), alloc)
    assert rel_error(out, _reference(xs, fs)) <= _tol(torch.float32, device, 2)
    assert torch.isnan(buf[:, 0]).all()  # nothing written outside the output


def _factor_in_layout(f: torch.Tensor, layout: str) -> torch.Tensor:
    """`f`'s values in another memory layout (same device)."""
    p, q = f.shape
    if layout == "contiguous":
        return f
    if layout == "transposed":  # column-major: f_cs = p, f_rs = 1
        return f.t().contiguous().t()
    if layout == "offset":  # contiguous rows from a base 4 bytes past a 16-byte boundary
        return torch.cat([f.new_zeros(1), f.reshape(-1)])[1:].view(p, q)
    assert layout in ("pitch4", "pitch1"), layout
    pad = 4 if layout == "pitch4" else 1  # row stride q + 4 (16-byte rows) or q + 1
    return torch.cat([f, f.new_full((p, pad), float("nan"))], dim=1)[:, :q]


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "offset", "pitch4", "pitch1"])
@pytest.mark.parametrize("batch,shapes", [(19, [(64, 64)] * 2), (7, [(3, 8), (5, 4), (7, 12)]),
                                          (9, [(24, 24), (5, 8)]), (37, [(16, 16)] * 3)])
def test_forward_fast_factor_layouts(device, layout, batch, shapes):
    """The register-tile forward's factor copies: 16-byte copies where a factor's rows are
    contiguous and 16-byte aligned (contiguous, pitch4), 4-byte ones otherwise (transposed, a base
    off a 16-byte boundary, an odd row pitch); columns past q and rows past p zero either way."""
    _C.kron_set_forward_kernel("new")
    try:
        x, fs = _make(batch, shapes, torch.float32, device)
        fl = [_factor_in_layout(f, layout) for f in fs]
        assert all(torch.equal(a, b) for a, b in zip(fl, fs))
        assert "kernel=fast" in _fwd_plan(x, fl)
        assert rel_error(kron_matmul(x, fl), _reference(x, fs)) <= _tol(torch.float32, device, 2)
    finally:
        _C.kron_set_forward_kernel("")


@pytest.mark.parametrize("sel", ["new:tile=4", "new:threads=128", "new:rows=1", "new:rows=3,stages=1",
                                 "new:threads=128,stages=1", "new:tile=8,rows=2,stages=2",
                                 # a few blocks, several tiles each: the persistent loop, the next
                                 # tile's copy into a buffer the last one read (on any GPU size)
                                 "new:threads=256,rows=2,grid=3", "new:threads=256,rows=2,stages=1,grid=2",
                                 "new:threads=128,rows=1,grid=3", "new:tile=4,rows=1,grid=2"])
@pytest.mark.parametrize("batch,shapes", [(61, [(8, 8)] * 4), (37, [(16, 16)] * 3), (19, [(64, 64)] * 2),
                                          (45, [(32, 32)] * 2), (7, [(3, 8), (5, 4), (7, 12)]),
                                          (13, [(64, 32), (64, 32)])])
def test_forward_fast_overrides(device, sel, batch, shapes):
    """The measurement overrides of the register-tile plan (tile, threads, rows, stages) compute the
    same product: every variant the GPU sweep may time is checked here."""
    _C.kron_set_forward_kernel(sel)
    try:
        assert sorted(_C.kron_forward_kernel()[4:].split(",")) == sorted(sel[4:].split(","))
        x, fs = _make(batch, shapes, torch.float32, device)
        plan = _fwd_plan(x, fs)
        assert "kernel=fast" in plan
        if "threads=128" in sel:
            assert "threads=128" in plan
        if "stages=1" in sel:
            assert "stages=1" in plan
        if "grid=" in sel:
            assert " grid=" + sel.split("grid=")[1] in plan
        assert rel_error(kron_matmul(x, fs), _reference(x, fs)) <= _tol(torch.float32, device, 2)
    finally:
        _C.kron_set_forward_kernel("")


def test_forward_kernel_choice(monkeypatch):
    """Which products the register-tile kernel takes, and the selection's syntax and errors."""
    _C.kron_set_forward_kernel("new")
    try:
        assert "kernel=fast" in _plan(1024, [(64, 64)] * 2)
        assert "regs=8x8 threads=128" in _plan(1024, [(8, 8)] * 4)  # short K loops: two blocks per SM
        # p = 64: one 256-thread block per SM, unless every 128-thread block of two per SM gets ≥ 6
        # tiles (this machine's planning limits: 8 SMs, so 16 blocks; 2 rows per tile)
        assert "regs=8x8 threads=256" in _plan(128, [(64, 64)] * 2)  # 64 tiles: 4 per block
        assert "regs=8x8 threads=128" in _plan(1024, [(64, 64)] * 2)  # 512 tiles: 32 per block
        assert "kernel=fast" not in _plan(1024, [(64, 64)] * 2, torch.float64)  # fp32 only
        assert "kernel=fast" not in _plan(1024, [(8, 7), (8, 8)])  # q not a multiple of 4
        p = _plan(256, [(16, 16)] * 4)  # N = 65536: no whole-row kernel; the natural split's tail
        assert p.startswith("fused modes 1-3") and "L=16 order=natural rows=M*L" in p and "kernel=fast" in p
        assert "kernel=fast" not in _plan(1024, [(64, 64)] * 2, backward=True)
        assert "stages=1" in _plan(1024, [(64, 64)] * 2)  # two X tiles do not fit
    finally:
        _C.kron_set_forward_kernel("")
    _C.kron_set_forward_kernel("")  # the default: auto
    assert _C.kron_forward_kernel() == "auto"
    assert "kernel=fast" in _plan(1024, [(64, 64)] * 2)
    assert "kernel=small" in _plan(1024, [(8, 8)] * 4)  # square, every p <= 16, 1024 <= N <= 8192
    assert "kernel=small" in _plan(1024, [(16, 16)] * 3)
    assert "kernel=small" in _plan(1024, [(4, 4), (16, 16), (16, 16)])
    assert "kernel=fast" in _plan(1024, [(32, 32)] * 2)  # p = 32: the register-tile kernel measured faster
    assert "kernel=fast" in _plan(1024, [(8, 8), (16, 16), (32, 32)])
    assert "kernel=small" not in _plan(1024, [(16, 16), (16, 8), (8, 8)])  # not square
    assert "kernel=fast" not in _plan(1024, [(16, 16), (16, 16)])  # N = 256: neither
    assert "kernel=small" not in _plan(1024, [(16, 16), (16, 16)])
    assert "kernel=small" not in _plan(64, [(32, 32)] * 3)  # N = 32768: past a block's rows
    assert "kernel=small" not in _plan(1024, [(8, 8)] * 4, torch.float64)  # fp32 only
    assert "modes 1-3 [16x16 16x16 16x16] L=16 order=natural rows=M*L chunk=4096->4096 kernel=small" in _plan(
        256, [(16, 16)] * 4)  # N = 65536: the natural split's tail
    for bad in ["fast", "new:tile=5", "new:rows=0", "new:threads=64", "new:foo=1", "new:tile", "new:grid=-1",
                "small:tile=4", "small:rows=2", "small:threads=64", "smallish"]:
        with pytest.raises(ValueError, match="SPARSEKERN_KRON_FWD|kernel name"):
            _C.kron_set_forward_kernel(bad)
    monkeypatch.setenv("SPARSEKERN_KRON_FWD", "old")
    _C.kron_set_forward_kernel("")  # re-read
    try:
        assert _C.kron_forward_kernel() == "old"
        assert "kernel=fast" not in _plan(1024, [(64, 64)] * 2)
        monkeypatch.setenv("SPARSEKERN_KRON_FWD", "new:rows=2")
        _C.kron_set_forward_kernel("")
        assert _C.kron_forward_kernel() == "new:rows=2"
        assert "rows=2 " in _plan(1024, [(64, 64)] * 2)
        monkeypatch.setenv("SPARSEKERN_KRON_FWD", "bogus")
        _C.kron_set_forward_kernel("")
        with pytest.raises(ValueError, match="SPARSEKERN_KRON_FWD"):
            _C.kron_forward_kernel()
    finally:
        monkeypatch.delenv("SPARSEKERN_KRON_FWD")
        _C.kron_set_forward_kernel("")


# --------------------------------------------------------------------------------------------
# The fiber-per-thread forward for small square factors (kron_small.h)
# --------------------------------------------------------------------------------------------
# Every factor size it takes (4, 8, 16, 32), mixed, 2 to 5 factors, N from 1024 to 8192; rows not a
# multiple of the rows per tile, fewer rows than one tile, a single row. (8,8)^4 and, from 256 rows,
# (16,16)^3 run the uniform-shape kernels (with_small_shape in kron_small.h).
SMALL_SHAPES = [
    (61, [(8, 8)] * 4), (37, [(16, 16)] * 3), (257, [(16, 16)] * 3), (45, [(32, 32)] * 2), (1, [(32, 32)] * 2),
    (9, [(8, 8), (16, 16), (32, 32)]), (7, [(32, 32), (16, 16), (8, 8)]), (11, [(4, 4), (8, 8), (32, 32)]),
    (5, [(32, 32), (8, 8), (4, 4), (8, 8)]), (40, [(16, 16), (8, 8), (8, 8)]), (3, [(4, 4)] * 5),
    (6, [(16, 16), (16, 16), (32, 32)]), (17, [(8, 8), (32, 32), (8, 8)]),
]


@pytest.mark.parametrize("sel", ["small", "small:threads=128", "small:threads=256,grid=2",
                                 "small:threads=128,grid=3"])
@pytest.mark.parametrize("batch,shapes", SMALL_SHAPES)
def test_forward_small(device, sel, batch, shapes):
    """The small-factor forward against float64: both block sizes, a few blocks with several tiles
    each (the persistent loop and the copy of the next tile into the buffer the last one read), x
    through strided unaligned rows (4-byte copies) and into an output with odd strides."""
    _C.kron_set_forward_kernel(sel)
    try:
        assert _C.kron_forward_kernel() == sel
        x, fs = _make(batch, shapes, torch.float32, device)
        plan = _fwd_plan(x, fs)
        assert "kernel=small" in plan, plan
        N = math.prod(p for p, _ in shapes)
        threads = 128 if "threads=128" in sel and N <= 4096 else 256
        if "threads=" in sel:
            assert f"threads={threads} " in plan
        if "grid=" in sel:
            tiles = -(-batch // (threads * 32 // N))
            assert f" grid={min(int(sel.split('grid=')[1]), tiles)}" in plan
        ref = _reference(x, fs)
        assert rel_error(kron_matmul(x, fs), ref) <= _tol(torch.float32, device, 2)
        xs = randn(batch, N + 3, device=device)[:, 1:N + 1]
        buf = torch.full((batch, N + 1), float("nan"), device=device)
        out = buf[:, 1:]
        def alloc(n):
            ws = torch.empty(n, dtype=torch.uint8, device=device)
            return ws.data_ptr(), n, ws

        _C.kron_matmul(as_dlpack(xs), [as_dlpack(f) for f in fs], as_dlpack(out), alloc)
        assert rel_error(out, _reference(xs, fs)) <= _tol(torch.float32, device, 2)
        assert torch.isnan(buf[:, 0]).all()
    finally:
        _C.kron_set_forward_kernel("")


def test_forward_small_block_size():
    """128 threads per block wherever a row fits (N <= 4096), 256 for 8192-wide rows."""
    for batch, shapes, want in [(20, [(8, 8)] * 4, "threads=128 rows=1 "), (9, [(16, 16), (8, 8), (8, 8)], "threads=128 rows=4 "),
                                (3, [(16, 16), (16, 16), (32, 32)], "threads=256 rows=1 ")]:
        _C.kron_set_forward_kernel("small")
        try:
            x, fs = _make(batch, shapes, torch.float32, "cpu")
            assert "kernel=small " + want in _fwd_plan(x, fs)
        finally:
            _C.kron_set_forward_kernel("")


# --------------------------------------------------------------------------------------------
# The two-factor register-tile backward (SPARSEKERN_KRON_BWD_KERNEL=old|new; kron_fast_bwd.h)
# --------------------------------------------------------------------------------------------
# Two factors with every side a multiple of 4 and at most 64: widths padded up to 8/16/32/64 (4, 12,
# 20, 24, 28, 40, 60), non-square, rows not a multiple of the rows per tile, a single row.
BWD_FAST_SHAPES = [
    (1, [(32, 32), (32, 32)]),
    (16, [(32, 32), (32, 32)]),
    (45, [(32, 32), (32, 32)]),
    (19, [(64, 64), (64, 64)]),
    (37, [(8, 12), (4, 16)]),
    (5, [(24, 20), (12, 8)]),
    (9, [(4, 64), (64, 4)]),
    (23, [(16, 4), (40, 28)]),
    (3, [(64, 8), (4, 60)]),
]


def _native_backward(x, fs, g, want_x=True, want=None):
    """∂ℓ/∂x and ∂ℓ/∂F through _C.kron_matmul_backward into NaN-filled buffers (None where not wanted)."""
    want = [True] * len(fs) if want is None else want
    gx = torch.full_like(x, float("nan")) if want_x else None
    gfs = [torch.full_like(f, float("nan")) if w else None for f, w in zip(fs, want)]

    alloc = _poisoned_alloc(x.device)
    _C.kron_matmul_backward(as_dlpack(x), [as_dlpack(f) for f in fs], as_dlpack(g),
                            as_dlpack(gx) if gx is not None else None,
                            [as_dlpack(t) if t is not None else None for t in gfs], alloc)
    return gx, gfs


def _check_backward(x, fs, g, gx, gfs, device):
    x64, f64 = x.double().requires_grad_(), [f.double().requires_grad_() for f in fs]
    kron_reference(x64, f64).backward(g.double())
    if gx is not None:
        assert rel_error(gx, x64.grad) <= _tol(torch.float32, device, 4)
    for a, f in zip(gfs, f64):
        if a is not None:
            assert rel_error(a, f.grad) <= _tol(torch.float32, device, 4)


@pytest.mark.parametrize("sel", ["new", "old", "new:stages=1", "new:tile=8", "new:rows=1,grid=2",
                                 "new:rows=3,stages=1,grid=3", "new:tile=8,rows=2,grid=3"])
@pytest.mark.parametrize("batch,shapes", BWD_FAST_SHAPES)
def test_backward_fast(device, sel, batch, shapes):
    """Every plan variant of the register-tile backward (and the generic kernel, "old") against
    float64: ∂ℓ/∂x and both ∂ℓ/∂F, buffers poisoned first, several tiles per block (grid caps)."""
    _C.kron_set_backward_kernel(sel)
    try:
        x, fs = _make(batch, shapes, torch.float32, device)
        plan = _plan(batch, shapes, backward=True, device=device)
        assert ("kernel=regtile-bwd" in plan) == (sel != "old"), plan
        if "stages=1" in sel:
            assert "stages=1" in plan
        if "tile=8" in sel:
            assert "regs=8x8" in plan
        if "grid=" in sel and batch >= 9:  # rows ≤ 3: at least 3 tiles
            assert " grid=" + sel.split("grid=")[1].split(",")[0] in plan
        g = randn(batch, math.prod(q for _, q in shapes), device=device)
        gx, gfs = _native_backward(x, fs, g)
        _check_backward(x, fs, g, gx, gfs, device)
    finally:
        _C.kron_set_backward_kernel("")


@pytest.mark.parametrize("want_x,want", [(False, [True, True]), (True, [False, True]), (True, [True, False]),
                                         (False, [False, True])])
def test_backward_fast_partial(device, want_x, want):
    """Only some gradients wanted: the others untouched, the wanted ones right."""
    x, fs = _make(21, [(32, 32), (16, 8)], torch.float32, device)
    assert "kernel=regtile-bwd" in _plan(21, [(32, 32), (16, 8)], backward=True, device=device)
    g = randn(21, 32 * 8, device=device)
    gx, gfs = _native_backward(x, fs, g, want_x, want)
    assert (gx is None) == (not want_x)
    _check_backward(x, fs, g, gx, gfs, device)


def test_backward_fast_strided(device):
    """Rows of x, ∂ℓ/∂y and ∂ℓ/∂x with strides that are not multiples of 4 floats and 4-byte
    offsets (no 16-byte vectors), transposed factors."""
    batch, shapes = 13, [(32, 16), (8, 32)]
    P, Q = 32 * 8, 16 * 32
    x = randn(batch, P + 3, device=device)[:, 1:P + 1]
    fs = [randn(q, p, device=device).mT for p, q in shapes]
    assert "kernel=regtile-bwd" in _plan(batch, shapes, backward=True, device=device)
    g = randn(batch, Q + 5, device=device)[:, 3:Q + 3]
    gbuf = torch.full((batch, P + 1), float("nan"), device=device)
    gx = gbuf[:, 1:]
    gfs = [torch.full((p, q), float("nan"), device=device) for p, q in shapes]

    alloc = _poisoned_alloc(device)
    _C.kron_matmul_backward(as_dlpack(x), [as_dlpack(f) for f in fs], as_dlpack(g), as_dlpack(gx),
                            [as_dlpack(t) for t in gfs], alloc)
    _check_backward(x, fs, g, gx, gfs, device)
    assert torch.isnan(gbuf[:, 0]).all()  # nothing written outside ∂ℓ/∂x


def test_backward_fast_autograd(device, monkeypatch):
    """Through kron_matmul's autograd, with the fused native backward forced (CUDA's default rule
    may run the step-wise one)."""
    monkeypatch.setenv("SPARSEKERN_KRON_BWD", "fused")
    x, fs = _make(33, [(32, 32), (32, 32)], torch.float32, device, grad=True)
    y = kron_matmul(x, fs)
    g = randn(*y.shape, device=device)
    y.backward(g)
    _check_backward(x.detach(), [f.detach() for f in fs], g, x.grad, [f.grad for f in fs], device)


def test_backward_kernel_choice(monkeypatch):
    """Which backward plans take the register-tile kernel, and the selection's syntax."""
    _C.kron_set_backward_kernel("")
    assert _C.kron_backward_kernel() == "auto"
    assert "kernel=regtile-bwd" in _plan(1024, [(64, 64)] * 2, backward=True)
    assert "kernel=regtile-bwd" in _plan(1024, [(32, 32)] * 2, backward=True)
    assert "kernel=regtile-bwd" not in _plan(1024, [(64, 64)] * 2, torch.float64, backward=True)
    assert "kernel=regtile-bwd" not in _plan(1024, [(8, 7), (8, 8)], backward=True)  # q % 4
    assert "kernel=regtile-bwd" not in _plan(1024, [(6, 8), (8, 8)], backward=True)  # p % 4
    assert "kernel=regtile-bwd" not in _plan(1024, [(16, 16)] * 3, backward=True)  # three factors
    assert "kernel=regtile-bwd" not in _plan(1024, [(128, 64), (8, 8)], backward=True)  # p > 64
    assert "kernel=regtile-bwd" not in _plan(1024, [(64, 64)] * 2)  # forward plan
    for bad in ["fast", "new:tile=5", "new:rows=0", "new:foo=1"]:
        with pytest.raises(ValueError, match="kernel name"):
            _C.kron_set_backward_kernel(bad)
    monkeypatch.setenv("SPARSEKERN_KRON_BWD_KERNEL", "old")
    _C.kron_set_backward_kernel("")  # re-read
    try:
        assert _C.kron_backward_kernel() == "old"
        assert "kernel=regtile-bwd" not in _plan(1024, [(32, 32)] * 2, backward=True)
        monkeypatch.setenv("SPARSEKERN_KRON_BWD_KERNEL", "new:rows=2")
        _C.kron_set_backward_kernel("")
        assert _C.kron_backward_kernel() == "new:rows=2"
        assert "rows=2 " in _plan(1024, [(32, 32)] * 2, backward=True)
        monkeypatch.setenv("SPARSEKERN_KRON_BWD_KERNEL", "bogus")
        _C.kron_set_backward_kernel("")
        with pytest.raises(ValueError, match="SPARSEKERN_KRON_BWD_KERNEL"):
            _C.kron_backward_kernel()
    finally:
        monkeypatch.delenv("SPARSEKERN_KRON_BWD_KERNEL")
        _C.kron_set_backward_kernel("")


# --------------------------------------------------------------------------------------------
# The fiber-per-thread backward for small square factors (SPARSEKERN_KRON_BWD_KERNEL=small;
# kron_small_bwd.h)
# --------------------------------------------------------------------------------------------
def _small_bwd_case(device, sel, batch, shapes, want_x=True, want=None):
    _C.kron_set_backward_kernel(sel)
    try:
        x, fs = _make(batch, shapes, torch.float32, device)
        plan = _plan(batch, shapes, backward=True, device=device)
        assert "kernel=small-bwd" in plan, plan
        N = math.prod(p for p, _ in shapes)
        threads = 128 if "threads=256" not in sel and N <= 4096 else 256
        assert f"threads={threads} rows={threads * 32 // N} " in plan, plan
        if "grid=" in sel:
            tiles = -(-batch // (threads * 32 // N))
            assert f" grid={min(int(sel.split('grid=')[1].split(',')[0]), tiles)}" in plan, plan
        if "lean=1" in sel and len(shapes) >= 3:
            assert f"bufs={len(shapes)} lean " in plan, plan
        g = randn(batch, N, device=device)
        gx, gfs = _native_backward(x, fs, g, want_x, want)
        assert (gx is None) == (not want_x)
        _check_backward(x, fs, g, gx, gfs, device)
    finally:
        _C.kron_set_backward_kernel("")


@pytest.mark.parametrize("sel", ["small", "small:threads=256,grid=2", "small:grid=3", "small:lean=1",
                                 "small:threads=256,grid=3,lean=1"])
@pytest.mark.parametrize("batch,shapes", SMALL_SHAPES)
def test_backward_small(device, sel, batch, shapes):
    """∂ℓ/∂x and every ∂ℓ/∂F against float64 (buffers poisoned first): every factor size, mixed
    sizes, 2 to 5 factors, both block sizes, a few blocks with several tiles each (the persistent
    loop, the next tile's copy, the per-thread sums across tiles)."""
    _small_bwd_case(device, sel, batch, shapes)


def test_backward_small_fewer_blocks_with_few_tiles(device):
    """Where three blocks per SM fit, the small-factor backward plans one fewer below 8.5 tiles per
    SM (kron_plan.cpp, kSmallBwdFewTiles2), three from there; right either side of the threshold.
    Emulated on the CPU: a virtual GPU of 8 SMs."""
    shapes = [(8, 8), (8, 8), (16, 16)]  # N = 1024: four rows per 128-thread tile, 4 tiles of smem
    sms = 8 if device.type == "cpu" else torch.cuda.get_device_properties(device).multi_processor_count
    few = (17 * sms - 1) // 2  # the most tiles below 8.5 per SM
    grids = {}
    for tiles in (few, few + 1):
        plan = _plan(4 * tiles, shapes, backward=True, device=device)
        assert "kernel=small-bwd" in plan and f" tiles={tiles} " in plan, plan
        grids[tiles] = int(plan.split(" grid=")[1].split()[0])
    if grids[few + 1] < 3 * sms:
        pytest.skip(f"three blocks per SM do not fit this device ({grids[few + 1]} blocks over {sms} SMs)")
    per_sm = grids[few + 1] // sms
    assert grids[few + 1] == per_sm * sms and grids[few] == (per_sm - 1) * sms, grids
    for tiles in (few, few + 1):
        _small_bwd_case(device, "small", 4 * tiles, shapes)


@pytest.mark.parametrize("sel", ["small", "small:grid=3", "small:grid=3,lean=1"])
@pytest.mark.parametrize("batch,shapes", [SMALL_SHAPES[0], SMALL_SHAPES[2], SMALL_SHAPES[4], SMALL_SHAPES[9]])
def test_backward_small_thread_order(device, monkeypatch, sel, batch, shapes):
    """The CPU emulation with each phase's threads in reverse order: a phase in which one thread
    reads what another writes (a race on the GPU) computes something else in one of the orders."""
    if device != "cpu":
        pytest.skip("the thread order of the CPU emulation")
    monkeypatch.setenv("SPARSEKERN_KRON_EMU_ORDER", "reverse")
    _small_bwd_case(device, sel, batch, shapes)


@pytest.mark.parametrize("want_x,want", [(False, [True, True, True]), (True, [False, False, False]),
                                         (True, [False, True, False]), (False, [False, False, True]),
                                         (False, [True, False, False])])
@pytest.mark.parametrize("lean", ["", ",lean=1"])
def test_backward_small_partial(device, want_x, want, lean):
    """Only some gradients wanted: the others untouched (None), the wanted ones right."""
    _small_bwd_case(device, "small:grid=2" + lean, 13, [(8, 8), (16, 16), (8, 8)], want_x, want)


@pytest.mark.parametrize("sel", ["small", "small:grid=4,lean=1"])
def test_backward_small_strided(device, sel):
    """Rows of x, ∂ℓ/∂y and ∂ℓ/∂x with strides that are not multiples of 4 floats and 4-byte
    offsets (no 16-byte vectors; lean: mode 0's contraction reads x that way too), transposed
    factors, gradients of the factors into strided views."""
    batch, shapes = 11, [(16, 16), (8, 8), (8, 8)]
    N = 1024
    _C.kron_set_backward_kernel(sel)
    try:
        assert "kernel=small-bwd" in _plan(batch, shapes, backward=True, device=device)
        x = randn(batch, N + 3, device=device)[:, 1:N + 1]
        fs = [randn(q, p, device=device).mT for p, q in shapes]
        g = randn(batch, N + 5, device=device)[:, 3:N + 3]
        gbuf = torch.full((batch, N + 1), float("nan"), device=device)
        gx = gbuf[:, 1:]
        gfs = [torch.full((q, p), float("nan"), device=device).mT for p, q in shapes]

        alloc = _poisoned_alloc(device)
        _C.kron_matmul_backward(as_dlpack(x), [as_dlpack(f) for f in fs], as_dlpack(g), as_dlpack(gx),
                                [as_dlpack(t) for t in gfs], alloc)
        _check_backward(x, fs, g, gx, gfs, device)
        assert torch.isnan(gbuf[:, 0]).all()  # nothing written outside ∂ℓ/∂x
    finally:
        _C.kron_set_backward_kernel("")


def test_backward_small_choice():
    """The default (auto) takes the small-factor backward for three or more factors, "small" for two
    as well, "new" and "old" never; only where the small-factor forward could run, with n + 1 tile
    buffers (n + 2 for two factors); other products keep their kernels under "small"."""
    _C.kron_set_backward_kernel("")
    try:
        assert "kernel=small-bwd threads=128 rows=1 bufs=5 " in _plan(1024, [(8, 8)] * 4, backward=True)
        assert "kernel=small-bwd threads=128 rows=1 bufs=4 " in _plan(1024, [(16, 16)] * 3, backward=True)
        assert "kernel=regtile-bwd" in _plan(1024, [(32, 32)] * 2, backward=True)
        assert "kernel=small-bwd" not in _plan(1024, [(8, 8)] * 3, backward=True)  # N = 512
        for other in ("new", "old"):
            _C.kron_set_backward_kernel(other)
            assert "kernel=small-bwd" not in _plan(1024, [(8, 8)] * 4, backward=True)
            assert "kernel=small-bwd" not in _plan(1024, [(32, 32)] * 2, backward=True)
        _C.kron_set_backward_kernel("small")
        assert _C.kron_backward_kernel() == "small"
        assert "kernel=small-bwd threads=128 rows=1 bufs=5 " in _plan(1024, [(8, 8)] * 4, backward=True)
        assert "kernel=small-bwd threads=128 rows=4 bufs=4 " in _plan(1024, [(32, 32)] * 2, backward=True)
        assert "kernel=small-bwd threads=256 rows=1 bufs=4 " in _plan(64, [(16, 16), (16, 16), (32, 32)], backward=True)
        assert "kernel=small-bwd threads=128 rows=1 bufs=7 " in _plan(64, [(4, 4)] * 6, backward=True)
        assert "kernel=small-bwd" not in _plan(1024, [(8, 8)] * 4)  # forward plan
        assert "kernel=small-bwd" not in _plan(1024, [(8, 8)] * 4, torch.float64, backward=True)
        assert "kernel=small-bwd" not in _plan(1024, [(8, 8)] * 3, backward=True)  # N = 512
        assert "kernel=small-bwd" not in _plan(1024, [(8, 8), (8, 12), (16, 16)], backward=True)  # not square
        assert "kernel=regtile-bwd" in _plan(1024, [(64, 64)] * 2, backward=True)  # p = 64: as auto
        _C.kron_set_backward_kernel("small:lean=1")  # one tile less (n ≥ 3; two modes as before)
        assert _C.kron_backward_kernel() == "small:lean=1"
        assert "kernel=small-bwd threads=128 rows=1 bufs=4 lean " in _plan(1024, [(8, 8)] * 4, backward=True)
        assert "kernel=small-bwd threads=128 rows=1 bufs=3 lean " in _plan(1024, [(16, 16)] * 3, backward=True)
        assert "kernel=small-bwd threads=128 rows=4 bufs=4 smem" in _plan(1024, [(32, 32)] * 2, backward=True)
        for bad in ["small:lean=2", "new:lean=1"]:
            with pytest.raises(ValueError, match="kernel name"):
                _C.kron_set_backward_kernel(bad)
    finally:
        _C.kron_set_backward_kernel("")


def test_backward_small_autograd(device):
    """Through kron_matmul's autograd with the small-factor backward selected."""
    _C.kron_set_backward_kernel("small")
    try:
        x, fs = _make(19, [(8, 8), (8, 8), (16, 16)], torch.float32, device, grad=True)
        y = kron_matmul(x, fs)
        g = randn(*y.shape, device=device)
        y.backward(g)
        _check_backward(x.detach(), [f.detach() for f in fs], g, x.grad, [f.grad for f in fs], device)
    finally:
        _C.kron_set_backward_kernel("")


# --------------------------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,shapes", SMALL + LARGE)
def test_backward(device, dtype, batch, shapes):
    x, fs = _make(batch, shapes, dtype, device, grad=True)
    y = kron_matmul(x, fs)
    g = randn(*y.shape, dtype=dtype, device=device)
    grads = torch.autograd.grad(y, [x, *fs], g)
    x64 = x.detach().double().requires_grad_()
    f64 = [f.detach().double().requires_grad_() for f in fs]
    ref = torch.autograd.grad(_reference_graph(x64, f64), [x64, *f64], g.double())
    for got, want in zip(grads, ref):
        assert got.shape == want.shape and got.dtype == dtype
        assert rel_error(got, want) <= _tol(dtype, device, 4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,shapes", SMALL + LARGE + [(9, [(8, 8)] * 4), (5, [(32, 32)] * 2)])
def test_cpu_gemm_steps(monkeypatch, dtype, batch, shapes):
    """The CPU's own plan (SPARSEKERN_KRON_CPU unset or "gemm"; the suite otherwise runs the GPU
    programs' emulation): every mode one GEMM step; forward, ∂ℓ/∂x and every ∂ℓ/∂F against float64."""
    monkeypatch.setenv("SPARSEKERN_KRON_CPU", "gemm")
    lines = _plan(batch, shapes, dtype).splitlines()
    assert len(lines) == len(shapes) + 1 and all(ln.startswith("cublas modes") for ln in lines[:-1]), lines
    monkeypatch.delenv("SPARSEKERN_KRON_CPU")  # unset: the same plan
    assert _plan(batch, shapes, dtype).splitlines() == lines
    cpu = torch.device("cpu")
    x, fs = _make(batch, shapes, dtype, cpu, grad=True)
    y = kron_matmul(x, fs)
    g = randn(*y.shape, dtype=dtype)
    grads = torch.autograd.grad(y, [x, *fs], g)
    x64 = x.detach().double().requires_grad_()
    f64 = [f.detach().double().requires_grad_() for f in fs]
    y64 = _reference_graph(x64, f64)
    assert rel_error(y, y64) <= _tol(dtype, cpu, 2)
    for got, want in zip(grads, torch.autograd.grad(y64, [x64, *f64], g.double())):
        assert got.shape == want.shape and got.dtype == dtype
        assert rel_error(got, want) <= _tol(dtype, cpu, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpu_gemm_steps_factor_gradient_paths(monkeypatch, dtype):
    """The CPU's ∂ℓ/∂F of a GEMM step: one GEMM per chunk of rows over a transposed copy of ∂ℓ/∂y
    where the state's rows are dense and L ≤ 64 (kron_matmul_cpu.cpp: factor_grad_typed), the batched
    per-row GEMMs otherwise (L = 128 here, and x with padded rows for the mode that reads x itself):
    every path against float64, and the two kinds of x rows against each other."""
    monkeypatch.setenv("SPARSEKERN_KRON_CPU", "gemm")
    from sparsekern import kron as kron_mod

    cpu = torch.device("cpu")
    for batch, shapes in [(37, [(32, 24), (16, 16)]), (3, [(128, 128), (2, 2)]), (70, [(5, 3), (8, 8), (4, 6)])]:
        x, fs = _make(batch, shapes, dtype, cpu)
        P = x.shape[1]
        g = randn(batch, math.prod(q for _, q in shapes), dtype=dtype)
        x64, f64 = x.double().requires_grad_(), [f.double().requires_grad_() for f in fs]
        want = torch.autograd.grad(_reference_graph(x64, f64), [x64, *f64], g.double())
        needs = [True] * (len(fs) + 1)
        dense = kron_mod._backward(x, fs, g, needs)
        xp = randn(batch, P + 4, dtype=dtype)[:, :P]  # rows P + 4 apart
        xp.copy_(x)
        padded = kron_mod._backward(xp, fs, g, needs)
        for a, b, w in zip(dense, padded, want):
            assert rel_error(a, w) <= _tol(dtype, cpu, 4) and rel_error(b, w) <= _tol(dtype, cpu, 4)
            assert rel_error(a, b) <= _tol(dtype, cpu, 4)


def _reference_graph(x64, f64):
    P = math.prod(f.shape[0] for f in f64)
    Q = math.prod(f.shape[1] for f in f64)
    if P * Q <= 1 << 20:
        return x64 @ functools.reduce(torch.kron, f64)
    return kron_reference(x64, f64)


@pytest.mark.parametrize("which", ["x", "first", "last", "middle"])
def test_backward_partial_needs(device, which):
    """Only the requested gradients are computed; each equals the full computation's."""
    shapes = [(3, 4), (16, 16), (5, 2)]
    x, fs = _make(3, shapes, torch.float64, device)
    req = {"x": [0], "first": [1], "last": [3], "middle": [2]}[which]
    leaves = [x, *fs]
    for i in req:
        leaves[i].requires_grad_()
    y = kron_matmul(leaves[0], leaves[1:])
    g = randn(*y.shape, dtype=torch.float64, device=device)
    got = torch.autograd.grad(y, [leaves[i] for i in req], g)
    full = [t.detach().clone().requires_grad_() for t in leaves]
    want = torch.autograd.grad(kron_reference(full[0], full[1:]), [full[i] for i in req], g)
    for a, b in zip(got, want):
        assert rel_error(a, b) <= 1e-10


def _eager_matches_op_and_reference(device, batch, shapes, want):
    """The eager Function's gradients (3-D x with non-contiguous rows, the leaves in `want`
    requiring grad) against the custom op's registered backward and float64 autograd."""
    from sparsekern.kron import _KronFunction, _kron_op
    P = math.prod(p for p, _ in shapes)
    base = randn(batch, 2, 2 * P, dtype=torch.float64, device=device)
    leaves = [base[:, :, ::2], *[randn(p, q, dtype=torch.float64, device=device) for p, q in shapes]]
    leaves = [t.requires_grad_(i in want) for i, t in enumerate(leaves)]  # x: non-contiguous rows
    assert not leaves[0].is_contiguous()
    y = kron_matmul(leaves[0], leaves[1:])
    assert type(y.grad_fn).__name__.startswith(_KronFunction.__name__)
    g = randn(*y.shape, dtype=torch.float64, device=device)
    got = torch.autograd.grad(y, [leaves[i] for i in want], g)
    via_op = torch.autograd.grad(_kron_op(leaves[0], leaves[1:]), [leaves[i] for i in want], g)
    ref_leaves = [t.detach().clone().requires_grad_() for t in leaves]
    ref = torch.autograd.grad(_reference_graph(ref_leaves[0], ref_leaves[1:]), [ref_leaves[i] for i in want], g)
    for i, a, b, c in zip(want, got, via_op, ref):
        assert a.shape == leaves[i].shape
        assert rel_error(a, c) <= 1e-10 and rel_error(b, c) <= 1e-10


@pytest.mark.parametrize("batch,shapes,want", [
    (1, [(3, 5), (7, 2), (24, 3)], [0, 2, 3]),          # batch 1, two of three factors
    (5, [(8, 8)] * 4, [1, 2, 4]),                        # one fused group (forward), split backward
    (3, [(5, 3), (2, 2), (3, 7), (2, 1), (7, 2)], [0, 1, 3, 5]),  # 5 factors, odd sizes
    (2, [(64, 64), (2, 3)], [2]),
])
def test_backward_eager_function(device, batch, shapes, want):
    """The eager backward (autograd.Function) matches the custom op's and a float64 reference for
    any subset of wanted gradients, with a 3-D non-contiguous x (several ∂ℓ/∂F in one reduction
    launch per fused group on CUDA)."""
    _eager_matches_op_and_reference(device, batch, shapes, want)


# Shapes whose forward runs several kernel groups (cuBLAS steps and/or fused groups), mostly as
# their backward does, so that the forward keeps its intermediate states for the backward; the
# last is one fused forward group that the backward splits (nothing to keep). Which ones keep
# states depends on the plans (dtype, device): the test reads them.
SAVED = [(3, [(128, 128)] * 2), (2, [(16, 16)] * 4), (5, [(3, 3), (70, 70), (5, 5)]),
         (4, [(100, 7), (2, 2), (9, 90)]), (6, [(65, 33), (5, 66)]), (3, [(8, 8)] * 4)]


def _groups(x, fs, backward: bool) -> list[str]:
    """The plan's kernel groups as their "modes a-b" (from kron_describe_plan)."""
    plan = _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], backward)
    return [line.split(" [")[0].split(" ", 1)[1] for line in plan.splitlines() if " modes " in line]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch,shapes", SAVED)
def test_backward_saved_states(device, dtype, batch, shapes):
    """A forward keeps its intermediate states exactly when it runs several groups and the
    backward the same ones; it gives the same y, and a backward that reads them the same
    gradients, as the recomputing path (the same kernels on the same data), and both match
    float64."""
    from sparsekern.kron import _backward, _forward
    x, fs = _make(batch, shapes, dtype, device)
    y, saved = _forward(x, fs, save=True)
    fwd, bwd = _groups(x, fs, False), _groups(x, fs, True)
    if len(fwd) > 1 and fwd == bwd:
        assert saved is not None and saved[1] > 0 and saved[2].numel() >= saved[1]
    else:
        assert saved is None
    # Bit-equal on the CPU; on CUDA, cuBLAS may pick another algorithm for the moved buffers.
    same = torch.equal if device.type == "cpu" else (lambda a, b: rel_error(a, b) <= _tol(dtype, device, 0.01))
    assert same(y, _forward(x, fs))
    g = randn(*y.shape, dtype=dtype, device=device)
    needs = [True] * (len(fs) + 1)
    got = _backward(x, fs, g, needs, saved)
    want = _backward(x, fs, g, needs)
    for a, b in zip(got, want):
        assert same(a, b)
    x64 = x.double().requires_grad_()
    f64 = [f.double().requires_grad_() for f in fs]
    ref = torch.autograd.grad(_reference_graph(x64, f64), [x64, *f64], g.double())
    for a, r in zip(got, ref):
        assert rel_error(a, r) <= _tol(dtype, device, 4)


@pytest.mark.parametrize("env", [None, "0"])
def test_backward_saved_states_by_autograd(device, monkeypatch, env):
    """Autograd's forward keeps the states unless SPARSEKERN_KRON_SAVE_STATES=0; the gradients are
    the same either way (and with retain_graph, the states serve a second backward)."""
    if env is None:
        monkeypatch.delenv("SPARSEKERN_KRON_SAVE_STATES", raising=False)
    else:
        monkeypatch.setenv("SPARSEKERN_KRON_SAVE_STATES", env)
    monkeypatch.setenv("SPARSEKERN_KRON_BWD", "fused")
    x, fs = _make(4, [(128, 128), (3, 70)], torch.float64, device, grad=True)
    y = kron_matmul(x, fs)
    states = y.grad_fn.kron_states
    assert (states is None) == (env == "0")
    g = randn(*y.shape, dtype=torch.float64, device=device)
    first = torch.autograd.grad(y, [x, *fs], g, retain_graph=True)
    second = torch.autograd.grad(y, [x, *fs], g)
    ref_leaves = [t.detach().clone().requires_grad_() for t in (x, *fs)]
    ref = torch.autograd.grad(_reference_graph(ref_leaves[0], ref_leaves[1:]), ref_leaves, g)
    for a, b, r in zip(first, second, ref):
        assert torch.equal(a, b) and rel_error(a, r) <= 1e-10


def test_backward_saved_states_too_small(device):
    """A saved-states buffer smaller than the shapes need (made for other shapes) is refused,
    naming the argument, rather than read past its end."""
    from sparsekern.kron import _forward, _native_args
    x, fs = _make(3, [(128, 128)] * 2, torch.float64, device)
    _, saved = _forward(x, fs, save=True)
    g = randn(3, 128 * 128, dtype=torch.float64, device=device)
    gx = torch.empty_like(x)
    with pytest.raises(ValueError, match="saved_states"):
        _C.kron_matmul_backward(as_dlpack(x), [as_dlpack(f) for f in fs], as_dlpack(g), as_dlpack(gx),
                                [None, None], *_native_args(x), saved[0], saved[1] - 1)


KEPT_T0 = [(45, [(32, 32), (32, 32)]), (19, [(64, 64), (64, 64)]), (13, [(32, 16), (8, 32)]),
           (3, [(64, 8), (4, 60)]), (1, [(16, 4), (40, 28)])]


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "offset", "pitch4", "pitch1"])
@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("batch,shapes", [(19, [(64, 64), (64, 64)]), (5, [(24, 20), (12, 8)]),
                                          (3, [(64, 8), (4, 60)])])
def test_backward_fast_factor_layouts(device, layout, kept, batch, shapes):
    """The register-tile backward's transposed factor copies: 16-byte loads where a factor's rows
    are contiguous and 16-byte aligned (contiguous, pitch4), 4-byte copies otherwise; with T0
    recomputed (which also copies F1 as it is) and kept by the forward."""
    from sparsekern.kron import _backward, _forward
    _C.kron_set_backward_kernel("new")
    _C.kron_set_forward_kernel("new")
    try:
        x, fs = _make(batch, shapes, torch.float32, device)
        fl = [_factor_in_layout(f, layout) for f in fs]
        assert all(torch.equal(a, b) for a, b in zip(fl, fs))
        g = randn(batch, math.prod(q for _, q in shapes), device=device)
        if kept:
            y, saved = _forward(x, fl, save=True)
            assert saved is not None
            got = _backward(x, fl, g, [True] * 3, saved)
            gx, gfs = got[0], got[1:]
        else:
            gx, gfs = _native_backward(x, fl, g)
        _check_backward(x, fs, g, gx, gfs, device)
    finally:
        _C.kron_set_backward_kernel("")
        _C.kron_set_forward_kernel("")


@pytest.mark.parametrize("fwd", ["new", "small"])
@pytest.mark.parametrize("sel", ["new", "new:stages=1", "new:rows=1,grid=2", "new:tile=8,rows=2,grid=3"])
@pytest.mark.parametrize("batch,shapes", KEPT_T0)
def test_backward_kept_t0(device, fwd, sel, batch, shapes):
    """Two factors through the register-tile (or, for square 32 × 32 factors, the small-factor)
    forward and the register-tile backward: a forward asked to save keeps T0 = X·F1 (checked
    against torch), y is unchanged, and the backward that reads T0 gives the gradients of float64
    (every plan variant of the kept layout)."""
    from sparsekern.kron import _backward, _forward
    _C.kron_set_backward_kernel(sel)
    _C.kron_set_forward_kernel(fwd)
    try:
        x, fs = _make(batch, shapes, torch.float32, device)
        want = "kernel=small" if fwd == "small" and shapes == [(32, 32)] * 2 else "kernel=fast"
        assert want in _fwd_plan(x, fs)
        (p0, q0), (p1, q1) = shapes
        # G1 over the stage's inputs where it fits (p0·q1 ≤ q0·q1 here): both layouts are tested
        assert (" alias" in _plan(batch, shapes, backward=True, device=device)) == (p0 <= q0), shapes
        y, saved = _forward(x, fs, save=True)
        assert saved is not None and saved[1] == (batch * p0 * q1 * 4 + 255) // 256 * 256
        assert torch.equal(y, _forward(x, fs))
        t0 = saved[2].view(torch.float32)[:batch * p0 * q1].view(batch, p0 * q1)
        want_t0 = (x.view(batch, p0, p1).double() @ fs[1].double()).view(batch, p0 * q1)
        assert rel_error(t0, want_t0) <= _tol(torch.float32, device, 2)
        g = randn(*y.shape, device=device)
        got = _backward(x, fs, g, [True] * 3, saved)
        _check_backward(x, fs, g, got[0], got[1:], device)
        # ∂ℓ/∂F only, from the kept state
        got = _backward(x, fs, g, [False, True, True], saved)
        assert got[0] is None
        _check_backward(x, fs, g, None, got[1:], device)
    finally:
        _C.kron_set_backward_kernel("")
        _C.kron_set_forward_kernel("")


def test_backward_kept_t0_only_when_both_kernels_run(device):
    """No T0 is kept when the forward is the generic kernel or the backward is."""
    from sparsekern.kron import _forward
    x, fs = _make(9, [(32, 32), (32, 32)], torch.float32, device)
    for fwd, bwd in [("old", ""), ("", "old")]:
        _C.kron_set_forward_kernel(fwd)
        _C.kron_set_backward_kernel(bwd)
        try:
            assert _forward(x, fs, save=True)[1] is None
        finally:
            _C.kron_set_forward_kernel("")
            _C.kron_set_backward_kernel("")
    assert _forward(x, fs, save=True)[1] is not None


def test_backward_kept_t0_too_small(device):
    """A kept-T0 buffer too small for the shapes is refused, naming the argument."""
    from sparsekern.kron import _forward, _native_args
    x, fs = _make(5, [(32, 32)] * 2, torch.float32, device)
    _, saved = _forward(x, fs, save=True)
    g = randn(5, 32 * 32, device=device)
    gx = torch.empty_like(x)
    with pytest.raises(ValueError, match="saved_states"):
        _C.kron_matmul_backward(as_dlpack(x), [as_dlpack(f) for f in fs], as_dlpack(g), as_dlpack(gx),
                                [None, None], *_native_args(x), saved[0], saved[1] - 1)


def test_no_grad_takes_the_native_path():
    x, fs = _make(3, [(2, 3), (3, 2)], torch.float64, torch.device("cpu"), grad=True)
    with torch.no_grad():
        assert kron_matmul(x, fs).grad_fn is None
    assert kron_matmul(x.detach(), [f.detach() for f in fs]).grad_fn is None


@pytest.mark.parametrize("shapes", [[(2, 3)], [(2, 3), (3, 2)], [(3, 2), (1, 2), (2, 3)],
                                    [(2, 2), (2, 1), (1, 3), (3, 2)], [(65, 1), (2, 3)]])
def test_gradcheck(shapes):
    x, fs = _make(3, shapes, torch.float64, torch.device("cpu"), grad=True)
    assert torch.autograd.gradcheck(lambda x, *fs: kron_matmul(x, list(fs)), (x, *fs))


# --------------------------------------------------------------------------------------------
# Step-wise backward (SPARSEKERN_KRON_BWD=steps): one GEMM per step, torch ops only
# --------------------------------------------------------------------------------------------
# Issue 5's ten cases at batch 3 or 7 (same factor shapes, so the same GEMM shapes per step apart
# from the batch), then rectangular factors, sizes 1, and single factors (plain linear).
STEPS = [
    (3, [(32, 32)] * 2), (7, [(128, 128)] * 2), (7, [(32, 32)] * 2), (3, [(64, 64)] * 2),
    (3, [(128, 128)] * 2), (7, [(16, 16)] * 3), (7, [(8, 8)] * 4), (3, [(16, 16)] * 4),
    (7, [(64, 64)] * 2), (3, [(32, 32)] * 3),
    (3, [(4, 6), (5, 3), (2, 7)]), (5, [(1, 3), (3, 1), (2, 2)]), (1, [(2, 3), (3, 5), (5, 2), (2, 1)]),
    (7, [(5, 3)]), (3, [(128, 3)]),
]


@pytest.fixture
def steps_bwd(monkeypatch):
    """Select the step-wise backward; the fused one raises, so a silent fallback cannot pass."""
    from sparsekern import kron as kron_mod

    def fused(*args, **kwargs):
        raise AssertionError("the fused backward ran with SPARSEKERN_KRON_BWD=steps")

    monkeypatch.setenv("SPARSEKERN_KRON_BWD", "steps")
    monkeypatch.setattr(kron_mod, "_backward", fused)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,shapes", STEPS)
def test_backward_steps(device, dtype, batch, shapes):
    """Every gradient against float64 autograd of the reference, and close to the fused backward's."""
    from sparsekern.kron import _backward, _backward_steps
    x, fs = _make(batch, shapes, dtype, device)
    Q = math.prod(q for _, q in shapes)
    g = randn(batch, Q, dtype=dtype, device=device)
    needs = [True] * (len(fs) + 1)
    got = _backward_steps(x, fs, g, needs)
    fused = _backward(x, fs, g, needs)
    x64 = x.double().requires_grad_()
    f64 = [f.double().requires_grad_() for f in fs]
    want = torch.autograd.grad(_reference_graph(x64, f64), [x64, *f64], g.double())
    for a, b, c in zip(got, fused, want):
        assert a.shape == c.shape and a.dtype == dtype and a.device == x.device
        assert rel_error(a, c) <= _tol(dtype, device, 4)
        assert rel_error(a, b) <= _tol(dtype, device, 8)


@pytest.mark.parametrize("which", [[0], [1], [2], [3], [0, 2], [1, 3], [2, 3], [0, 1, 2, 3]])
def test_backward_steps_needs(device, which):
    """Only the wanted gradients, each equal to the full computation's; None for the others."""
    from sparsekern.kron import _backward_steps
    shapes = [(3, 4), (16, 16), (5, 2)]
    x, fs = _make(4, shapes, torch.float64, device)
    g = randn(4, 4 * 16 * 2, dtype=torch.float64, device=device)
    full = _backward_steps(x, fs, g, [True] * 4)
    got = _backward_steps(x, fs, g, [i in which for i in range(4)])
    for i, (a, b) in enumerate(zip(got, full)):
        if i in which:
            assert torch.equal(a, b)  # the same GEMMs on the same operands
        else:
            assert a is None
    assert _backward_steps(x, fs, g, [False] * 4) == [None] * 4


def test_steps_rule_matches_the_measured_cases():
    """The default choice (CUDA) over issue 5's table: steps exactly where it measured faster than
    the generic fused backward (two fp32 factors of the register-tile backward take that instead:
    _regtile_backward, checked in test_backward_default_choice)."""
    from sparsekern.kron import _steps_faster
    steps = {((64, 64),) * 2, ((32, 32),) * 3}
    for shapes in [((32, 32),) * 2, ((128, 128),) * 2, ((64, 64),) * 2, ((16, 16),) * 3, ((8, 8),) * 4,
                   ((16, 16),) * 4, ((32, 32),) * 3]:
        assert _steps_faster(list(shapes)) == (shapes in steps), shapes
    assert not _steps_faster([(64, 64)])  # one factor: a plain product either way
    assert not _steps_faster([(64, 64), (128, 64)])
    assert _steps_faster([(64, 96), (96, 64)])


@pytest.mark.parametrize("env", [None, "fused", "steps"])
@pytest.mark.parametrize("shapes", [[(64, 64), (64, 64)], [(8, 8)] * 3])
def test_backward_default_choice(device, monkeypatch, env, shapes):
    """Which backward runs: the variable when set, else the shape rule on CUDA and the fused one on
    the CPU; the other implementation raises, so the check cannot pass by accident."""
    from sparsekern import kron as kron_mod
    from sparsekern.kron import _steps_faster
    if env is None:
        monkeypatch.delenv("SPARSEKERN_KRON_BWD", raising=False)
        # fp32 two-factor shapes of the register-tile backward take it (64 x 64 among them)
        regtile = len(shapes) == 2 and all(s <= 64 and s % 4 == 0 for shape in shapes for s in shape)
        assert kron_mod._regtile_backward(torch.empty(0), [torch.empty(p, q) for p, q in shapes]) == regtile
        steps = device.type == "cuda" and _steps_faster(shapes) and not regtile
    else:
        monkeypatch.setenv("SPARSEKERN_KRON_BWD", env)
        steps = env == "steps"

    def boom(*args, **kwargs):
        raise AssertionError("the other backward ran")

    monkeypatch.setattr(kron_mod, "_backward" if steps else "_backward_steps", boom)
    x, fs = _make(3, shapes, torch.float32, device, grad=True)
    y = kron_matmul(x, fs)
    grads = torch.autograd.grad(y, [x, *fs], torch.ones_like(y))
    x64 = x.detach().double().requires_grad_()
    f64 = [f.detach().double().requires_grad_() for f in fs]
    want = torch.autograd.grad(_reference_graph(x64, f64), [x64, *f64], torch.ones_like(y).double())
    for a, b in zip(grads, want):
        assert rel_error(a, b) <= _tol(torch.float32, device, 4)


@pytest.mark.parametrize("batch,shapes,want", [
    (1, [(3, 5), (7, 2), (24, 3)], [0, 2, 3]),
    (5, [(8, 8)] * 4, [1, 2, 4]),
    (3, [(5, 3), (2, 2), (3, 7), (2, 1), (7, 2)], [0, 1, 3, 5]),
    (2, [(64, 64), (2, 3)], [2]),
    (4, [(6, 5)], [0]),
])
def test_backward_steps_selected(device, steps_bwd, batch, shapes, want):
    """With the variable set, the eager Function and the custom op's registered backward both run
    the steps (the fused one would raise), for any subset of wanted gradients, 3-D strided x."""
    _eager_matches_op_and_reference(device, batch, shapes, want)


@pytest.mark.parametrize("split", [0, 1, 4, 7, 10_000])
@pytest.mark.parametrize("batch,shapes", [(3, [(4, 6), (5, 3), (2, 7)]), (5, [(7, 3)]), (2, [(16, 16)] * 3)])
def test_backward_steps_split(device, monkeypatch, split, batch, shapes):
    """∂ℓ/∂F as slices of the contraction (B dividing the rows or not, more slices than rows):
    the same gradients as one GEMM, x's unchanged."""
    from sparsekern.kron import _backward_steps
    x, fs = _make(batch, shapes, torch.float64, device)
    g = randn(batch, math.prod(q for _, q in shapes), dtype=torch.float64, device=device)
    needs = [True] * (len(fs) + 1)
    one = _backward_steps(x, fs, g, needs)
    monkeypatch.setenv("SPARSEKERN_KRON_BWD_SPLIT", str(split))
    got = _backward_steps(x, fs, g, needs)
    assert torch.equal(got[0], one[0])
    for a, b in zip(got[1:], one[1:]):
        assert a.shape == b.shape and rel_error(a, b) <= 1e-13


def test_backward_steps_empty_and_broadcast_grad(device, steps_bwd):
    fs = [randn(3, 4, device=device).requires_grad_(), randn(2, 5, device=device).requires_grad_()]
    x = torch.empty(2, 0, 6, device=device, requires_grad=True)
    kron_matmul(x, fs).sum().backward()
    assert x.grad.shape == x.shape
    for f in fs:  # an empty sum: exactly zero
        assert torch.equal(f.grad, torch.zeros_like(f))
        f.grad = None
    x = randn(5, 6, dtype=torch.float64, device=device).requires_grad_()
    f64 = [f.detach().double().requires_grad_() for f in fs]
    kron_matmul(x, f64).sum().backward()  # ∂ℓ/∂y is an expanded (stride-0) tensor
    x2 = x.detach().clone().requires_grad_()
    r64 = [f.detach().clone().requires_grad_() for f in f64]
    kron_reference(x2, r64).sum().backward()
    assert rel_error(x.grad, x2.grad) <= 1e-12
    for a, b in zip(f64, r64):
        assert rel_error(a.grad, b.grad) <= 1e-12


@pytest.mark.parametrize("shapes", [[(2, 3)], [(2, 3), (3, 2)], [(3, 2), (1, 2), (2, 3)],
                                    [(2, 2), (2, 1), (1, 3), (3, 2)]])
def test_backward_steps_gradcheck(steps_bwd, shapes):
    """gradcheck, and gradgradcheck: the steps are differentiable torch ops (double backward)."""
    x, fs = _make(3, shapes, torch.float64, torch.device("cpu"), grad=True)
    fn = lambda x, *fs: kron_matmul(x, list(fs))  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, *fs))
    assert torch.autograd.gradgradcheck(fn, (x, *fs))


def test_backward_steps_compile(steps_bwd):
    """torch.compile(fullgraph=True) traces the steps into the backward graph."""
    m = KronLinear([(3, 4), (2, 5)], dtype=torch.float64)
    x = torch.randn(7, 6, dtype=torch.float64, requires_grad=True)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: m(x).square().sum(), backend="aot_eager", fullgraph=True)
    compiled(x).backward()
    gx, gf = x.grad.clone(), [f.grad.clone() for f in m.factors]
    x.grad = None
    m.zero_grad()
    x64 = x.detach().clone().requires_grad_()
    (kron_reference(x64, list(m.factors)) + m.bias).square().sum().backward()
    assert rel_error(gx, x64.grad) <= 1e-12
    for a, f in zip(gf, m.factors):
        assert rel_error(a, f.grad) <= 1e-12


# --------------------------------------------------------------------------------------------
# Left product
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_left(device, dtype):
    shapes = [(3, 4), (5, 2), (2, 3)]
    fs = [randn(p, q, dtype=dtype, device=device, ) for p, q in shapes]
    K = functools.reduce(torch.kron, [f.double() for f in fs])
    for xshape in [(24,), (24, 1), (24, 7), (2, 3, 24, 5)]:
        x = randn(*xshape, dtype=dtype, device=device)
        y = kron_matmul(fs, x, left=True)
        ref = K @ x.double()
        assert y.shape == ref.shape
        assert rel_error(y, ref) <= _tol(dtype, device)
    x = randn(24, 7, dtype=dtype, device=device).requires_grad_()
    fg = [f.clone().requires_grad_() for f in fs]
    g = randn(30, 7, dtype=dtype, device=device)
    got = torch.autograd.grad(kron_matmul(fg, x, left=True), [x, *fg], g)
    x64 = x.detach().double().requires_grad_()
    f64 = [f.detach().double().requires_grad_() for f in fs]
    want = torch.autograd.grad(functools.reduce(torch.kron, f64) @ x64, [x64, *f64], g.double())
    for a, b in zip(got, want):
        assert rel_error(a, b) <= _tol(dtype, device, 4)


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------
def test_bad_input(device):
    x = randn(4, 6, device=device)
    a, b = randn(2, 3, device=device), randn(3, 2, device=device)
    with pytest.raises(ValueError, match=r"`x` must have last dim 6"):
        kron_matmul(randn(4, 7, device=device), [a, b])
    with pytest.raises(ValueError, match=r"`factors\[1\]` must be 2-D"):
        kron_matmul(x, [a, randn(3, device=device)])
    with pytest.raises(ValueError, match=r"`factors\[0\]` must be 2-D"):
        kron_matmul(x, [randn(1, 2, 3, device=device), b])
    with pytest.raises(ValueError, match=r"`factors` must hold at least one factor"):
        kron_matmul(x, [])
    with pytest.raises(TypeError, match=r"`factors` must be a list"):
        kron_matmul(x, a)
    with pytest.raises(TypeError, match=r"`factors\[1\]` must have the same dtype as `x`"):
        kron_matmul(x, [a, b.double()])
    with pytest.raises(TypeError, match=r"`factors\[0\]` must have dtype"):
        kron_matmul(x, [a.int(), b])
    with pytest.raises(TypeError, match=r"`x` must have dtype"):
        kron_matmul(x.int(), [a, b])
    other = torch.device("meta")
    with pytest.raises(ValueError, match=r"`factors\[1\]` must be on the same device as `x`"):
        kron_matmul(x, [a, b.to(other)])
    with pytest.raises(ValueError, match=r"`factors\[0\]` must have non-zero dims"):
        kron_matmul(torch.empty(4, 0, device=device), [torch.empty(0, 3, device=device), b])
    with pytest.raises(ValueError, match=r"`factors\[1\]` must have non-zero dims"):
        kron_matmul(randn(4, 2, device=device), [a[:2, :3], torch.empty(1, 0, device=device)])
    with pytest.raises(ValueError, match=r"`x` must have at least 1 dims"):
        kron_matmul(torch.tensor(1.0, device=device), [randn(1, 1, device=device)])
    with pytest.raises(TypeError, match=r"`factors` must be a list"):
        kron_matmul(x, [a, b], left=True)  # factors come first with left=True
    with pytest.raises(ValueError, match=r"`x` must have dim -2 of size 6 \(= 3·2, the product of the factors. columns\)"):
        kron_matmul([a, b], randn(5, 4, device=device), left=True)  # (Fa ⊗ Fb) is 6x6: x needs 6 rows


def test_native_bad_input(device):
    """The C++ layer names the argument too (for callers that bypass the Python checks)."""
    x = randn(4, 6, device=device)
    a, b = randn(2, 3, device=device), randn(3, 2, device=device)
    out = torch.empty(4, 6, device=device)
    with pytest.raises(ValueError, match=r"`x` must be 4x6|`x` must be"):
        _C.kron_matmul(as_dlpack(randn(4, 5, device=device)), [as_dlpack(a), as_dlpack(b)], as_dlpack(out))
    with pytest.raises(ValueError, match=r"`y` must be 4x6"):
        _C.kron_matmul(as_dlpack(x), [as_dlpack(a), as_dlpack(b)], as_dlpack(torch.empty(4, 5, device=device)))
    with pytest.raises(TypeError, match=r"`factors\[1\]` must have the dtype of `x`"):
        _C.kron_matmul(as_dlpack(x), [as_dlpack(a), as_dlpack(b.double())], as_dlpack(out))
    with pytest.raises(ValueError, match=r"`factors` must hold at least one factor"):
        _C.kron_matmul(as_dlpack(x), [], as_dlpack(out))
    with pytest.raises(ValueError, match=r"`factors\[0\]` must be 2-D"):
        _C.kron_matmul(as_dlpack(x), [as_dlpack(randn(6, device=device))], as_dlpack(out))
    with pytest.raises(ValueError, match=r"`factors\[1\]` must have a unit stride"):
        _C.kron_matmul(as_dlpack(x), [as_dlpack(a), as_dlpack(randn(6, 4, device=device)[::2, ::2])],
                       as_dlpack(out))
    with pytest.raises(ValueError, match=r"`x` must have a unit column stride"):
        _C.kron_matmul(as_dlpack(randn(6, 4, device=device).mT), [as_dlpack(a), as_dlpack(b)], as_dlpack(out))
    big = [randn(16, 16, device=device)] * 4
    with pytest.raises(ValueError, match=r"`workspace` must hold at least"):
        _C.kron_matmul(as_dlpack(randn(2, 65536, device=device)), [as_dlpack(f) for f in big],
                       as_dlpack(torch.empty(2, 65536, device=device)), None)


def test_factor_shapes_validation():
    with pytest.raises(ValueError, match=r"`factor_shapes` must hold at least one"):
        KronLinear([])
    with pytest.raises(ValueError, match=r"`factor_shapes\[1\]` must be positive"):
        KronLinear([(2, 3), (0, 2)])
    with pytest.raises(TypeError, match=r"`factor_shapes\[0\]` must be a \(p, q\) pair"):
        KronLinear([(2, 3, 4)])
    with pytest.raises(ValueError, match=r"`factor_shapes`.*give a 6 → 6 layer"):
        KronLinear.from_dense(torch.nn.Linear(5, 6), [(2, 3), (3, 2)])
    with pytest.raises(TypeError, match=r"`linear` must be an nn.Linear"):
        KronLinear.from_dense(torch.nn.Conv1d(2, 2, 1), [(2, 2)])


# --------------------------------------------------------------------------------------------
# KronLinear
# --------------------------------------------------------------------------------------------
def test_kron_linear(device):
    m = KronLinear([(4, 3), (5, 2), (3, 2)], device=device, dtype=torch.float64)
    assert (m.in_features, m.out_features) == (60, 12)
    assert "in_features=60, out_features=12, factors=[4x3, 5x2, 3x2], bias=True" in repr(m)
    x = randn(7, 60, dtype=torch.float64, device=device)
    ref = torch.nn.functional.linear(x, m.weight, m.bias)
    assert rel_error(m(x), ref) <= 1e-12
    m(x).sum().backward()
    assert all(f.grad is not None for f in m.factors) and m.bias.grad is not None
    nb = KronLinear([(4, 3)], bias=False, device=device)
    assert nb.bias is None and "bias=False" in repr(nb)


def test_kron_linear_init_variance():
    torch.manual_seed(0)
    m = KronLinear([(16, 8), (16, 8)], bias=True)
    lin = torch.nn.Linear(256, 64)
    w = m.weight.detach()
    # Product entries have nn.Linear's variance 1/(3·in_features).
    assert abs(w.var().item() / (1 / (3 * 256)) - 1) < 0.15
    assert abs(w.var().item() / lin.weight.detach().var().item() - 1) < 0.15
    x = torch.randn(4096, 256)
    assert abs(m(x).var().item() / lin(x).var().item() - 1) < 0.25
    assert m.bias.abs().max() <= 1 / 16


def test_from_dense_exact_and_approximate(device):
    a, b = randn(4, 3, dtype=torch.float64), randn(5, 2, dtype=torch.float64)
    lin = torch.nn.Linear(20, 6, dtype=torch.float64)
    with torch.no_grad():
        lin.weight.copy_(torch.kron(a, b).mT)
    m = KronLinear.from_dense(lin.to(device), [(4, 3), (5, 2)])
    assert m.approximation_error < 1e-12
    x = randn(3, 20, dtype=torch.float64, device=device)
    assert rel_error(m(x), lin(x)) < 1e-12
    # Three factors by recursion: exact for an exact product.
    c = randn(2, 2, dtype=torch.float64)
    w = functools.reduce(torch.kron, [a, b, c])
    factors, err = nearest_kronecker(w, [(4, 3), (5, 2), (2, 2)])
    assert err < 1e-12 and rel_error(functools.reduce(torch.kron, factors), w) < 1e-12
    # A random matrix: the error is reported, and no worse than the best rank-one of R's.
    lin = torch.nn.Linear(20, 6).to(device)
    m = KronLinear.from_dense(lin, [(4, 3), (5, 2)])
    r = lin.weight.detach().mT.double().reshape(4, 5, 3, 2).permute(0, 2, 1, 3).reshape(12, 10)
    s = torch.linalg.svdvals(r)
    want = math.sqrt((s[1:] ** 2).sum().item()) / s.norm().item()
    assert abs(m.approximation_error - want) < 1e-6
    assert 0 < m.approximation_error < 1


# --------------------------------------------------------------------------------------------
# Plans: fusion happens where it should
# --------------------------------------------------------------------------------------------
def _plan(batch, shapes, dtype=torch.float32, backward=False, device="cpu"):
    x = torch.empty(batch, math.prod(p for p, _ in shapes), dtype=dtype, device=device)
    fs = [torch.empty(p, q, dtype=dtype, device=device) for p, q in shapes]
    return _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], backward)


def test_plans():
    p = _plan(1024, [(8, 8)] * 4)
    assert p.splitlines()[0].startswith("fused modes 0-3") and p.endswith("workspace=0")
    assert _plan(256, [(16, 16)] * 4, torch.float64).count("fused") == 2  # fp64: the generic groups
    assert "cublas modes 0 [128x128]" in _plan(32, [(128, 128), (128, 128)])
    assert "rn=4" in _plan(8, [(2, 2)] * 8)
    assert _plan(5, [(7, 9)]).startswith("cublas")  # a single factor is one GEMM


def test_compile_traces_custom_op():
    """torch.compile(fullgraph=True) traces the custom op (fake impl: shapes and errors)."""
    fs = [torch.randn(3, 4), torch.randn(2, 5)]
    x = torch.randn(7, 6)
    op = torch.ops.sparsekern.kron_matmul
    torch.library.opcheck(op, (x, fs), test_utils=("test_schema", "test_faketensor"))
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fx, ffs = torch.empty(2, 3, 6), [torch.empty(3, 4), torch.empty(2, 5)]
        assert kron_matmul(fx, ffs).shape == (2, 3, 20)
        with pytest.raises(ValueError, match=r"`x` must have last dim 6"):
            kron_matmul(torch.empty(2, 5), ffs)


def test_compile_fullgraph_module():
    """KronLinear under torch.compile(fullgraph=True): forward and backward through the custom ops."""
    m = KronLinear([(3, 4), (2, 5)], dtype=torch.float64)
    x = torch.randn(7, 6, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(lambda x: m(x).square().sum(), backend="aot_eager", fullgraph=True)
    y = compiled(x)
    y.backward()
    gx, gf = x.grad.clone(), [f.grad.clone() for f in m.factors]
    x.grad = None
    m.zero_grad()
    y_ref = m(x).square().sum()
    y_ref.backward()
    assert rel_error(y, y_ref) <= 1e-12
    assert rel_error(gx, x.grad) <= 1e-12
    for a, f in zip(gf, m.factors):
        assert rel_error(a, f.grad) <= 1e-12


def test_bench_summary():
    """sparsekern.bench.kron.summarize: issue 5's numbers from bench rows (two cases with a FastKron
    pair, one failed row that must be left out)."""
    from sparsekern.bench.kron import summarize

    def row(op, shape, ours, anchor, dev_ours, dev_anchor, bench=None, **kw):
        r = dict(family="kron", op=f"kron_matmul {op}", shape=shape, ours=ours, anchor_time=anchor,
                 ratio=ours / anchor, device_ms_ours=dev_ours, device_ms_anchor=dev_anchor,
                 device_ratio=dev_ours / dev_anchor, **kw)
        if bench:
            r["bench"] = bench
        return r

    rows = [row("fwd", "1024x[8 8]", 0.02, 0.08, 0.01, 0.04, roofline_ms=0.005),
            row("bwd", "1024x[8 8]", 0.05, 0.2, 0.03, 0.1),
            row("fwd", "1024x[8 8]", 0.02, 0.1, 0.01, 0.05, bench="fwd_fastkron"),
            row("bwd", "1024x[8 8]", 0.05, 0.1, 0.03, 0.06, bench="bwd_fastkron"),
            row("fwd", "16x[4 4]", 0.01, 0.01, 0.004, 0.002, roofline_ms=0.001),
            dict(family="kron", op="kron_matmul bwd", shape="16x[4 4]", error="boom", ours=float("nan"))]
    out = io.StringIO()
    s = summarize(rows, out=out)
    by = {c["shape"]: c for c in s["cases"]}
    assert by["1024x[8 8]"]["speedup_eager"] == pytest.approx(4.0)
    assert by["1024x[8 8]"]["speedup_device"] == pytest.approx(4.0)
    assert by["1024x[8 8]"]["pct_roofline"] == pytest.approx(50.0)
    assert by["1024x[8 8]"]["bwd_over_fwd"] == pytest.approx(3.0)
    assert by["1024x[8 8]"]["fastkron_fwd_over_ours"] == pytest.approx(5.0)
    assert by["1024x[8 8]"]["fastkron_bwd_over_ours"] == pytest.approx(2.0)
    assert math.isnan(by["16x[4 4]"]["bwd_over_fwd"])  # its backward row failed
    assert s["geomean_eager"] == pytest.approx(2.0)  # sqrt(4 * 1)
    assert s["geomean_device"] == pytest.approx(math.sqrt(2.0))  # sqrt(4 * 0.5)
    assert s["slower_than_v2"] == ["16x[4 4]"]  # device time 2x v2's
    assert "(target 60)" in out.getvalue().splitlines()[1]  # 1024 rows at 50% of the roofline


def test_bench_fastkron_probe(monkeypatch):
    """The bench's FastKron probe survives a peer that crashes: the case whose forward crashed is
    named, the later cases still run (in a new child), and a wrong result is reported as such."""
    from sparsekern.bench import kron as bk

    fake = (
        "import os, sys\n"
        "for case in sys.argv[1:]:\n"
        "    print('start', case, flush=True)\n"
        "    if case.startswith('2:'):\n"
        "        os.kill(os.getpid(), 11)\n"
        "    print('done', case, 0.5 if case.startswith('3:') else 1e-7, flush=True)\n")
    monkeypatch.setattr(bk, "_PROBE", fake)
    got = bk._fastkron_probe([(1, [8, 8]), (2, [16, 16]), (3, [4, 4]), (4, [32, 32])])
    assert got[(1, (8, 8))] is None
    assert "crashed" in got[(2, (16, 16))]
    assert "relative error 5.00e-01" in got[(3, (4, 4))]
    assert got[(4, (32, 32))] is None


# Natural-order split (make_plan): the tail modes 1 … n−1 over M · p0 rows by a whole-row kernel,
# then mode 0 as one strided-batched GEMM. Shapes whose whole product no such kernel takes.
NATURAL = [
    (6, [(16, 16)] * 4),                               # tail 16^3 (N 4096): small-factor kernel
    (5, [(32, 32)] * 3),                               # tail 32^2: register-tile kernel
    (3, [(3, 5), (16, 16), (16, 16), (16, 16)]),       # non-square head
    (4, [(8, 8)] * 5),                                 # tail 8^4
    (2, [(32, 24), (32, 32), (32, 32)]),               # head q != p
]


@pytest.fixture(params=["gemm", "kernel", "auto"])
def head(request, monkeypatch):
    """The natural split's mode 0 through strided-batched GEMMs (SPARSEKERN_KRON_HEAD=gemm),
    kron_head.h's pass (=kernel, heads up to 32), or the default (auto: the pass for heads up to 8),
    read at every plan."""
    monkeypatch.setenv("SPARSEKERN_KRON_HEAD", request.param)
    return request.param


@pytest.mark.parametrize("batch,shapes", NATURAL)
def test_natural_split_forward(device, batch, shapes, head):
    """Plan and result: the split is planned (fp32, dense rows) and agrees with float64; X or Y
    with padded rows (X: no split, the generic plan) and "old" (never) agree too."""
    x, fs = _make(batch, shapes, torch.float32, device)
    plan = _plan(batch, shapes, device=device.type)
    if device.type == "cuda" or "emulate" in os.environ.get("SPARSEKERN_KRON_CPU", ""):
        assert plan.startswith(f"fused modes 1-{len(shapes) - 1}") and "order=natural" in plan, plan
        limit = {"gemm": 0, "kernel": 32, "auto": 8}[head]
        kind = "head" if max(shapes[0]) <= limit else "cublas"
        assert f"{kind} modes 0 [{shapes[0][0]}x{shapes[0][1]}] L=" in plan and plan.count("order=natural") == 2
    want = _reference(x.double(), [f.double() for f in fs])
    tol = tolerance(torch.float32)
    assert rel_error(kron_matmul(x, fs), want) < tol
    N, Q = x.shape[1], want.shape[1]
    xp = randn(batch, N + 4, device=device)[:, :N]  # rows N + 4 apart
    xp.copy_(x)
    xs = _C.kron_describe_plan(as_dlpack(xp), [as_dlpack(f) for f in fs], False)
    assert "order=natural" not in xs
    assert rel_error(kron_matmul(xp, fs), want) < tol
    from sparsekern.kron import _native_args, _to_dlpack

    yp = torch.full((batch, Q + 8), float("nan"), device=device)  # Y rows Q + 8 apart
    _C.kron_matmul(_to_dlpack(x), [_to_dlpack(f) for f in fs], _to_dlpack(yp[:, :Q]), *_native_args(x), None)
    assert rel_error(yp[:, :Q], want) < tol and torch.isnan(yp[:, Q:]).all()
    _C.kron_set_forward_kernel("old")
    try:
        assert "order=natural" not in _plan(batch, shapes, device=device.type)
        assert rel_error(kron_matmul(x, fs), want) < tol
    finally:
        _C.kron_set_forward_kernel("")


@pytest.mark.parametrize("batch,shapes", NATURAL)
@pytest.mark.parametrize("save", ["1", "0"])
def test_natural_split_backward(device, batch, shapes, save, monkeypatch, head):
    """The backward's natural split (tail: the small-factor or register-tile backward over M · p0
    rows; head: strided-batched GEMMs): planned for dense rows, gradients against float64 through
    autograd with the forward's states kept (their size checked: the tail's T0 among them where the
    tail is a two-factor product) or recomputed (SPARSEKERN_KRON_SAVE_STATES), for every
    subset kind of wanted gradients, and with ∂ℓ/∂x rows padded (no split: the generic plan)."""
    from sparsekern import kron as kron_mod
    from sparsekern.kron import _native_args, _to_dlpack

    monkeypatch.setenv("SPARSEKERN_KRON_SAVE_STATES", save)
    monkeypatch.setenv("SPARSEKERN_KRON_BWD", "fused")  # the native backward, whatever the shape rule
    plan = _plan(batch, shapes, backward=True, device=device.type)
    if device.type == "cuda" or "emulate" in os.environ.get("SPARSEKERN_KRON_CPU", ""):
        assert plan.startswith(f"fused modes 1-{len(shapes) - 1}") and plan.count("order=natural") == 2, plan
        assert "kernel=small-bwd" in plan or "kernel=regtile-bwd" in plan
        assert ("head modes 0" in plan) == (max(shapes[0]) <= {"gemm": 0, "kernel": 32, "auto": 8}[head]), plan
    x, fs = _make(batch, shapes, torch.float32, device, grad=True)
    if save == "1" and (device.type == "cuda" or "emulate" in os.environ.get("SPARSEKERN_KRON_CPU", "")):
        # The kept states: the head's input, and the tail's T0 where the tail is the two-factor
        # register-tile backward (M · p0 rows of p1 · q2), each 256-byte aligned.
        _, kept = kron_mod._forward(x.detach(), [f.detach() for f in fs], save=True)
        up = lambda n: (n + 255) // 256 * 256  # noqa: E731
        tail = shapes[1:]
        want_bytes = up(4 * batch * shapes[0][0] * math.prod(q for _, q in tail))
        if "kernel=regtile-bwd" in plan:
            want_bytes += up(4 * batch * shapes[0][0] * tail[0][0] * tail[1][1])
        assert kept is not None and kept[1] == want_bytes, (kept, want_bytes)
    y = kron_matmul(x, fs)
    g = randn(*y.shape, device=device)
    y.backward(g)
    x6 = x.detach().double().requires_grad_()
    f6 = [f.detach().double().requires_grad_() for f in fs]
    want = torch.autograd.grad(kron_reference(x6, f6), [x6, *f6], g.double())
    tol = 4 * tolerance(torch.float32)
    assert rel_error(x.grad, want[0]) < tol
    for f, w in zip(fs, want[1:]):
        assert rel_error(f.grad, w) < tol
    xd, fd = x.detach(), [f.detach() for f in fs]
    n = len(fs)
    for needs in ([True] + [False] * n, [False] + [True] * n, [False, True] + [False] * (n - 1)):
        got = kron_mod._backward(xd, fd, g, needs)
        for a, w, wanted in zip(got, want, needs):
            assert (a is None) != wanted and (a is None or rel_error(a, w) < tol)
    # ∂ℓ/∂x with rows 4 floats apart: the generic plan, the same gradient.
    gxp = torch.full((batch, xd.shape[1] + 4), float("nan"), device=device)
    gfs = [torch.empty_like(f) for f in fd]
    _C.kron_matmul_backward(_to_dlpack(xd), [_to_dlpack(f) for f in fd], _to_dlpack(g),
                            _to_dlpack(gxp[:, :xd.shape[1]]), [_to_dlpack(t) for t in gfs], *_native_args(xd), 0, 0)
    assert rel_error(gxp[:, :xd.shape[1]], want[0]) < tol and torch.isnan(gxp[:, xd.shape[1]:]).all()
    for a, w in zip(gfs, want[1:]):
        assert rel_error(a, w) < tol


@pytest.mark.cuda
@pytest.mark.parametrize("batch,shapes", [(300, [(8, 8)] * 5), (7, [(64, 4), (16, 16), (16, 16)]),
                                          (5, [(4, 64), (32, 32), (32, 32)]), (130, [(32, 32)] * 3),
                                          (3, [(16, 32), (32, 32), (32, 32)]),
                                          (4, [(32, 16), (16, 16), (16, 16), (16, 16)]),
                                          (5, [(32, 32), (20, 20), (20, 20)]), (40, [(16, 16)] * 4)])
def test_natural_head_gradient_pass(batch, shapes):
    """The natural split head's ∂ℓ/∂F on CUDA (kron_head_f32.cu's passes): more work items than
    blocks (300 rows in 4 chunks each, 1024 blocks: some sum two), heads of 64 × 4 and 4 × 64 (one
    and sixteen threads per 4 × 4 block of the gradient); the staged pass of 32 × 32, 16 × 32,
    32 × 16 and 16 × 16 heads with many items per block (130 rows of 32 items on three blocks per
    SM), few rows, and rows of L = 400 (the last item of a row half past its end); against
    float64; x rows 4 floats apart (no natural split) agree too."""
    from sparsekern import kron as kron_mod

    device = torch.device("cuda")
    plan = _plan(batch, shapes, backward=True, device="cuda")
    assert plan.startswith(f"fused modes 1-{len(shapes) - 1}") and plan.count("order=natural") == 2, plan
    x, fs = _make(batch, shapes, torch.float32, device)
    g = randn(batch, math.prod(q for _, q in shapes), device=device)
    x6, f6 = x.double().requires_grad_(), [f.double().requires_grad_() for f in fs]
    want = torch.autograd.grad(kron_reference(x6, f6), [x6, *f6], g.double())
    tol = 4 * tolerance(torch.float32)
    got = kron_mod._backward(x, fs, g, [True] * (len(fs) + 1))
    for a, w in zip(got, want):
        assert rel_error(a, w) < tol
    N = x.shape[1]
    xp = randn(batch, N + 4, device=device)[:, :N]
    xp.copy_(x)
    got = kron_mod._backward(xp, fs, g, [False, True] + [False] * (len(fs) - 1))
    assert rel_error(got[1], want[1]) < tol


def test_natural_backward_overrides_steps_rule():
    """Where the native backward is the natural split, the Python layer keeps it even where the
    shape rule would pick the step-wise backward ((p·q ≥ 1024) × 3); not for padded rows, fp64
    or two factors."""
    from sparsekern import kron as kron_mod

    shapes = [(32, 32)] * 3
    assert kron_mod._steps_faster(shapes)
    x, fs = _make(5, shapes, torch.float32, "cpu")
    emulated = "emulate" in os.environ.get("SPARSEKERN_KRON_CPU", "")
    assert kron_mod._natural_backward(x, fs, shapes) == emulated  # the CPU's GEMM-step plan has no split
    xp = randn(5, x.shape[1] + 4)[:, :x.shape[1]]
    assert not kron_mod._natural_backward(xp, fs, shapes)
    assert not kron_mod._natural_backward(x.double(), [f.double() for f in fs], shapes)
    assert not kron_mod._natural_backward(*_make(5, [(32, 32)] * 2, torch.float32, "cpu"), [(32, 32)] * 2)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():  # tracing: the shape rule alone, no planner query on fake tensors
        fx, ffs = torch.empty(5, 32768), [torch.empty(32, 32) for _ in range(3)]
        assert not kron_mod._natural_backward(fx, ffs, shapes)


def test_natural_split_saved_states_across_kernel_change(device):
    """A forward that kept the natural split's state, then a backward whose plan is not the split
    ("old": the generic groups, another state layout): the kept state must not be read; the
    gradients still agree with float64. Also an empty batch through the split's shapes."""
    from sparsekern import kron as kron_mod

    shapes = [(16, 16)] * 4
    x, fs = _make(3, shapes, torch.float32, device)
    y, saved = kron_mod._forward(x, fs, save=True)
    g = randn(*y.shape, device=device)
    x6 = x.double().requires_grad_()
    f6 = [f.double().requires_grad_() for f in fs]
    want = torch.autograd.grad(kron_reference(x6, f6), [x6, *f6], g.double())
    tol = 4 * tolerance(torch.float32)
    _C.kron_set_backward_kernel("old")
    try:
        got = kron_mod._backward(x, fs, g, [True] * 5, saved)
    finally:
        _C.kron_set_backward_kernel("")
    for a, w in zip(got, want):
        assert rel_error(a, w) < tol
    got = kron_mod._backward(x, fs, g, [True] * 5, saved)  # the split again: reads the kept state
    for a, w in zip(got, want):
        assert rel_error(a, w) < tol
    e = torch.empty(0, x.shape[1], device=device, requires_grad=True)
    fe = [f.clone().requires_grad_() for f in fs]
    ye = kron_matmul(e, fe)
    assert ye.shape == (0, y.shape[1])
    ye.sum().backward()
    assert e.grad.shape == e.shape and all(float(f.grad.abs().sum()) == 0 for f in fe)


def test_natural_split_head_setting(monkeypatch):
    """SPARSEKERN_KRON_HEAD: "auto" (or unset), "kernel" or "gemm"; anything else is a clear error,
    not a silent default; heads wider than 32 keep the GEMMs, and auto takes the pass up to 8."""
    monkeypatch.setenv("SPARSEKERN_KRON_HEAD", "fast")
    with pytest.raises(ValueError, match="SPARSEKERN_KRON_HEAD must be"):
        _plan(4, [(16, 16)] * 4)
    monkeypatch.setenv("SPARSEKERN_KRON_HEAD", "kernel")
    if "emulate" in os.environ.get("SPARSEKERN_KRON_CPU", ""):
        assert "head modes 0 [16x16]" in _plan(4, [(16, 16)] * 4)
        assert "cublas modes 0 [64x48]" in _plan(4, [(64, 48)] + [(16, 16)] * 3)
    for value in ("auto", None):
        if value is None:
            monkeypatch.delenv("SPARSEKERN_KRON_HEAD")
        else:
            monkeypatch.setenv("SPARSEKERN_KRON_HEAD", value)
        if "emulate" in os.environ.get("SPARSEKERN_KRON_CPU", ""):
            assert "head modes 0 [8x8]" in _plan(4, [(8, 8)] * 5)
            assert "cublas modes 0 [16x16]" in _plan(4, [(16, 16)] * 4)


# (label, batch, factor shapes, dtype): each reaches another set of kernels and host paths. fp32
# 1024 × (32,32): the register-tile forward and backward with T0 kept in the saved states;
# 64 × (16)^3: the small-factor forward and backward (a reduction launch of the blocks'
# partials); 8 × (32)^3: the natural split (tail T0 kept, head ∂ℓ/∂F pass, strided-batched
# GEMMs); 16 × (128,128): cuBLAS steps with a workspace allocated per call; (3,8)(5,4)(7,12): the
# generic fused kernels; bf16 (16,16)^2 and fp16 (24,8)(4,4): the 16-bit paths.
_KRON_CAPTURE = [("f32-regtile", 1024, [(32, 32)] * 2, torch.float32),
                 ("f32-small", 64, [(16, 16)] * 3, torch.float32),
                 ("f32-natural", 8, [(32, 32)] * 3, torch.float32),
                 ("f32-cublas", 16, [(128, 128)] * 2, torch.float32),
                 ("f32-generic", 37, [(3, 8), (5, 4), (7, 12)], torch.float32),
                 ("bf16", 33, [(16, 16)] * 2, torch.bfloat16),
                 ("f16", 5, [(24, 8), (4, 4)], torch.float16)]


@pytest.mark.cuda
@pytest.mark.parametrize("case", _KRON_CAPTURE, ids=[c[0] for c in _KRON_CAPTURE])
def test_cuda_graph_capture(case):
    """KronLinear's forward and every gradient captured in one CUDA graph (the remedy for the small
    products, whose eager calls are host-bound): the capture succeeds (no synchronisation, no
    allocation outside torch's allocator, the saved states and workspaces from the graph's pool, and
    no per-stream cache keeps a buffer allocated during the capture),
    and replays on new inputs copied into the captured tensors give the float64 results of those
    inputs, twice; a no-grad forward captured on its own likewise."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    _, batch, shapes, dtype = case
    dev = torch.device("cuda")
    layer = KronLinear(shapes, device=dev, dtype=dtype)
    P, Q = math.prod(p for p, _ in shapes), math.prod(q for _, q in shapes)
    x = randn(batch, P, dtype=dtype, device=dev).requires_grad_()
    go = randn(batch, Q, dtype=dtype, device=dev)
    params = (x, *layer.factors, layer.bias)

    def step():
        y = layer(x)
        return (y, *torch.autograd.grad(y, params, go))

    def forward():
        with torch.no_grad():
            return layer(x)

    graph, outs = capture_graph(step)
    fwd_graph, y_nograd = capture_graph(forward)
    t = _tol(dtype, dev, 2)
    for _ in range(2):
        with torch.no_grad():
            x.copy_(randn(batch, P, dtype=dtype, device=dev))
            go.copy_(randn(batch, Q, dtype=dtype, device=dev))
        graph.replay()
        fwd_graph.replay()
        torch.cuda.synchronize()
        x6 = x.detach().double().requires_grad_()
        f6 = [f.detach().double().requires_grad_() for f in layer.factors]
        b6 = layer.bias.detach().double().requires_grad_()
        y6 = kron_reference(x6, f6) + b6
        want = torch.autograd.grad(y6, [x6, *f6, b6], go.double())
        assert rel_error(outs[0], y6) <= t
        assert rel_error(y_nograd, y6) <= t
        for got, w in zip(outs[1:], want):
            assert rel_error(got, w) <= 4 * t


_PDL_CASES = [_KRON_CAPTURE[0], ("f32-regtile-64", 40, [(64, 64)] * 2, torch.float32),
              _KRON_CAPTURE[1], ("f32-small-8", 7, [(8, 8)] * 4, torch.float32), _KRON_CAPTURE[-1]]


def _pdl_case(case):
    """x, the factors, ∂ℓ/∂y and every gradient wanted, for a _PDL_CASES case on the GPU."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    _, batch, shapes, dtype = case
    x, fs = _make(batch, shapes, dtype, torch.device("cuda"))
    g = randn(batch, math.prod(q for _, q in shapes), dtype=dtype, device=x.device)
    return x, fs, g, [True] * (len(shapes) + 1)


def _check_forward_backward(x, fs, g, y, grads):
    """y and [∂ℓ/∂x, ∂ℓ/∂F…] of x · (F1 ⊗ …) against float64."""
    ref = kron_reference(x.double(), [f.double() for f in fs])
    assert rel_error(y, ref) <= _tol(x.dtype, x.device, 4)
    _check_backward(x, fs, g, grads[0], grads[1:], x.device)


@pytest.mark.cuda
@pytest.mark.parametrize("case", _PDL_CASES, ids=[c[0] for c in _PDL_CASES])
def test_dependent_launch(case, monkeypatch):
    """The fp32 fused forwards and the ∂ℓ/∂F reduction launched as programmatic dependents of the
    kernel before them (the default on compute capability 9.0+) and as plain launches
    (SPARSEKERN_KRON_PDL=0, read per launch) give bit-identical outputs and gradients, eagerly and
    replayed from a CUDA graph, and those match float64."""
    from sparsekern.kron import _backward, _forward
    x, fs, g, needs = _pdl_case(case)
    got = {}
    for pdl in ["1", "0"]:
        monkeypatch.setenv("SPARSEKERN_KRON_PDL", pdl)
        eager = (_forward(x, fs), *_backward(x, fs, g, needs))
        graph, outs = capture_graph(lambda: (_forward(x, fs), *_backward(x, fs, g, needs)))
        for o in outs:
            o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        for a, b in zip(eager, outs):
            assert torch.equal(a, b)
        got[pdl] = eager
    for a, b in zip(got["1"], got["0"]):
        assert torch.equal(a, b)
    if x.dtype == torch.float32:
        _check_forward_backward(x, fs, g, got["1"][0], got["1"][1:])


@pytest.mark.cuda
@pytest.mark.parametrize("case", _PDL_CASES[:4], ids=[c[0] for c in _PDL_CASES[:4]])
def test_dependent_launch_waits_for_the_previous_kernel(case):
    """A dependent launch may start before the kernel ahead of it ends, so each of ours must wait
    before reading: in one CUDA graph torch's kernels write x, the factors and ∂ℓ/∂y right before
    the forward and the backward read them, and a kernel of torch's reads the forward's output right
    after; each replay with new sources must give that replay's results (a kernel that read early
    would see the previous replay's values)."""
    from sparsekern.kron import _backward, _forward
    x, fs, g, needs = _pdl_case(case)
    src = [x.clone(), *(f.clone() for f in fs), g.clone()]

    def step():
        x.copy_(src[0]).mul_(2.0)
        for f, s in zip(fs, src[1:-1]):
            f.copy_(s).mul_(0.5)
        g.copy_(src[-1]).add_(1.0)
        y = _forward(x, fs)
        return (y * 3.0, *_backward(x, fs, g, needs))

    graph, outs = capture_graph(step)
    for r in range(3):
        gen = torch.Generator(device=x.device).manual_seed(100 + r)
        for s in src:
            s.copy_(torch.randn(s.shape, generator=gen, device=x.device, dtype=x.dtype))
        graph.replay()
        torch.cuda.synchronize()
        xs, fss, gs = src[0] * 2.0, [s * 0.5 for s in src[1:-1]], src[-1] + 1.0
        _check_forward_backward(xs, fss, gs, outs[0] / 3.0, outs[1:])


@pytest.mark.cuda
def test_compile_reduce_overhead():
    """KronLinear under torch.compile(mode="reduce-overhead"): inductor around the custom ops and
    its CUDA-graph trees replaying them (the custom ops allocate their workspaces from torch inside
    the captured region); forward and every gradient against the eager layer, three calls on new
    inputs."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    dev = torch.device("cuda")
    layer = KronLinear([(32, 32), (32, 32)], device=dev, dtype=torch.float32)
    compiled = torch.compile(layer, mode="reduce-overhead")
    for _ in range(3):
        x = randn(257, 1024, device=dev).requires_grad_()
        go = randn(257, 1024, device=dev)
        y = compiled(x)
        got = torch.autograd.grad(y, [x, *layer.factors, layer.bias], go)
        y = y.clone()  # the tree's output buffers are reused by the next replay
        y_e = layer(x)
        want = torch.autograd.grad(y_e, [x, *layer.factors, layer.bias], go)
        assert rel_error(y, y_e) <= 1e-5
        for a, w in zip(got, want):
            assert rel_error(a, w) <= 1e-5


@pytest.mark.parametrize("batch,shapes", [(3, [(2, 3), (3, 2)]), (2, [(3, 2), (1, 2), (2, 3)]),
                                          (4, [(4, 4), (4, 4)])])
def test_double_backward(device, batch, shapes):
    """create_graph through the default (native) backward: gradgradcheck in float64, and a gradient
    penalty's gradient against the same built from kron_reference (the backward then runs the
    step-wise torch ops, which are differentiable; the native backward op has no formula)."""
    x, fs = _make(batch, shapes, torch.float64, device, grad=True)
    fn = lambda x, *fs: kron_matmul(x, list(fs))  # noqa: E731
    assert torch.autograd.gradgradcheck(fn, (x, *fs))
    layer = KronLinear(shapes, device=device, dtype=torch.float64)
    xg = x.detach().clone().requires_grad_()
    gx, = torch.autograd.grad(layer(xg).square().sum(), xg, create_graph=True)
    got = torch.autograd.grad(gx.square().sum(), list(layer.factors))
    x6 = x.detach().clone().requires_grad_()
    gx6, = torch.autograd.grad((kron_reference(x6, list(layer.factors)) + layer.bias).square().sum(), x6,
                               create_graph=True)
    want = torch.autograd.grad(gx6.square().sum(), list(layer.factors))
    for a, w in zip(got, want):
        assert rel_error(a, w) <= 1e-10


def test_kept_states_survive_a_kernel_selection_change(device, monkeypatch):
    """The backward plans again with the selection current when it runs, and matmul plans after
    sizing the kept-states buffer: a selection changed in between (another thread, now that the
    bindings drop the GIL) left a buffer sized for one plan and written (or not) by another, which
    the backward read as its own: ∂ℓ/∂F1 off by 7e3 relative (session 31's C++ audit). The Python
    layer drops kept states when kron_selection_epoch() moved; the backward recomputes them."""
    from sparsekern import kron as km

    torch.manual_seed(5)
    x = randn(64, 1024, device=device)
    fs = [randn(32, 32, device=device) / 6 for _ in range(2)]
    g = randn(64, 1024, device=device)
    x6 = x.double().requires_grad_()
    f6 = [f.double().requires_grad_() for f in fs]
    want = torch.autograd.grad(kron_reference(x6, f6), [x6, *f6], g.double())
    orig = km._allocator

    def flipping(t):  # the first allocation (the kept states, sized under "new") flips the selection
        inner, calls = orig(t), []

        def alloc(nbytes):
            if not calls:
                _C.kron_set_forward_kernel("old")
            calls.append(nbytes)
            return inner(nbytes)
        return alloc

    before = _C.kron_forward_kernel(), _C.kron_backward_kernel()
    try:
        _C.kron_set_forward_kernel("new")
        _C.kron_set_backward_kernel("new")
        monkeypatch.setattr(km, "_allocator", flipping)
        _, saved = km._forward(x, fs, save=True)
        monkeypatch.setattr(km, "_allocator", orig)
        _C.kron_set_forward_kernel("new")
        got = km._backward(x, fs, g, [True, True, True], saved)
        for a, b in zip(got, want):
            assert rel_error(a, b) <= 1e-5
    finally:
        _C.kron_set_forward_kernel(before[0])
        _C.kron_set_backward_kernel(before[1])
