"""Block-sparse family: BlockSparseMatrix, dsd/dds/sdd, BlockSparseLinear, the model patcher and
pattern learning. Every body runs on the CPU and (marked) on CUDA through the `device` fixture;
references are float64 dense products with the block pattern applied."""
from __future__ import annotations

import io
import os
import re
import warnings

import pytest
import torch

import sparsekern
from sparsekern import BlockSparseLinear, BlockSparseMatrix, BlockSparseModelPatcher, _C, bsr
from sparsekern.testing import capture_graph, rel_error, run_python, tolerance

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
# "tf32": fp32 with torch.backends.cuda.matmul.allow_tf32 on (the tensor-core path on CUDA).
OP_DTYPES = [torch.float64, torch.float32, "tf32", torch.float16, torch.bfloat16]
BLOCKS = [16, 32, 64, 128]


def tol(dtype, device) -> float:
    tf32 = device.type == "cuda" and dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32
    return tolerance(dtype, tf32)


@pytest.fixture
def op_dtype(request):
    """Resolves the OP_DTYPES parameter; "tf32" allows TF32 for the test's duration."""
    value = request.param
    if value != "tf32":
        yield value
        return
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield torch.float32
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def _dtype_id(d) -> str:
    return d if isinstance(d, str) else str(d)[6:]


def randn(*shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, dtype=torch.float64).to(dtype=dtype, device=device)


def make_matrix(rows, cols, block, density, dtype, device, mask=None) -> BlockSparseMatrix:
    if mask is None:
        m = BlockSparseMatrix.random((rows, cols), block, density, dtype=dtype)
    else:
        m = BlockSparseMatrix.from_mask(mask, block, dtype=dtype)
        m = m.with_values(randn(*m.values.shape, dtype=dtype))
    return m.to(device)


def dense64(m: BlockSparseMatrix) -> torch.Tensor:
    return m.to(torch.float64).to_dense()


# ------------------------------------------------------------------------------------------------
# Products against float64 references: every op × transpose × dtype × block size
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("op_dtype", OP_DTYPES, ids=_dtype_id, indirect=True)
@pytest.mark.parametrize("transpose", [False, True], ids=["S", "St"])
def test_dds(device, block, op_dtype, transpose):
    dtype = op_dtype
    rows, cols = 2 * block, 3 * block
    s = make_matrix(rows, cols, block, 0.5, dtype, device)
    op = s.t() if transpose else s
    ref_s = dense64(op)
    k, n = op.shape
    bias = randn(n, dtype=dtype, device=device)
    for m in (1, 7, 129):
        x = randn(m, k, dtype=dtype, device=device)
        out = bsr.dds(x, op)
        assert out.shape == (m, n) and out.dtype == dtype
        assert rel_error(out, x.double() @ ref_s) <= tol(dtype, device)
        out = bsr.dds(x, op, bias)
        assert rel_error(out, x.double() @ ref_s + bias.double()) <= tol(dtype, device)


@pytest.mark.cuda
@pytest.mark.parametrize("block", [32, 64, 128])
@pytest.mark.parametrize("op_dtype", [torch.float16, torch.bfloat16, "tf32"], ids=_dtype_id, indirect=True)
@pytest.mark.parametrize("transpose", [False, True], ids=["S", "St"])
def test_dds_many_tiles_per_cta(block, op_dtype, transpose):
    """Large enough that the persistent Hopper kernel gives each CTA several tiles of both of its
    consumers (pipeline wrap-around across tiles), with empty block columns and a ragged last row
    panel; the SM80 kernels run it on other GPUs."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    dtype = op_dtype
    device = torch.device("cuda")
    rows, cols, m = 2048, 1536, 4100
    g = torch.Generator().manual_seed(block)
    mask = torch.rand(rows // block, cols // block, generator=g) < 0.3
    mask[:, ::5] = False    # empty block columns of S (empty output columns of S-products)
    mask[::7, :] = False    # and empty block rows (empty output columns of Sᵀ-products)
    s = make_matrix(rows, cols, block, None, dtype, device, mask=mask)
    op = s.t() if transpose else s
    k, n = op.shape
    x = randn(m, k, dtype=dtype, device=device)
    bias = randn(n, dtype=dtype, device=device)
    out = bsr.dds(x, op, bias)
    ref = x.double() @ dense64(op) + bias.double()
    assert torch.isfinite(out).all()
    assert rel_error(out, ref) <= tol(dtype, device)
    # Zero-density columns hold exactly the bias.
    empty = dense64(op).abs().sum(0) == 0
    assert empty.any()
    assert torch.equal(out[:, empty], bias[empty].expand(m, -1))


def _grouped_edge_matrix(block, dtype, transpose):
    """A pattern for the grouped sm_90a dds (tiles of 128 / block block columns whose k loop walks
    the union of the columns' k blocks): as the product's operand it has 7 block columns (the last
    group is partial), a dense column of 80 k blocks (index windows of 32 refilled twice), an
    empty column inside a group, a group whose columns are all empty, and columns whose k blocks
    interleave."""
    kb, nb = 80, 7
    mask = torch.zeros(kb, nb, dtype=torch.bool)  # (k blocks, block columns) of the operand
    mask[:, 0] = True                              # dense column
    mask[::3, 1] = True                            # interleaved with column 3
    mask[1::2, 3] = True                           # (column 2 stays empty)
    if block == 32:
        pass                                       # columns 4-6: the whole second group empty
    else:
        mask[5:9, 4] = True                        # b = 64: groups {4, 5} half full, {6} empty;
                                                   # b = 128 (one column per tile): 2, 5, 6 empty
    if transpose:  # the operand is Sᵀ: S holds the transposed mask
        mask = mask.t().contiguous()
    m = BlockSparseMatrix.from_mask(mask, block, dtype=dtype)
    return m.with_values(randn(*m.values.shape, dtype=dtype)).to("cuda")


@pytest.mark.cuda
@pytest.mark.parametrize("block", [32, 64, 128])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("transpose", [False, True], ids=["S", "St"])
def test_dds_grouped_edges(block, dtype, transpose):
    """The grouped kernel's edge cases (see _grouped_edge_matrix) with row counts below one
    128-row half, a ragged second half, and several 256-row tiles; every output column checked,
    empty ones exactly equal to the bias."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    s = _grouped_edge_matrix(block, dtype, transpose)
    op = s.t() if transpose else s
    ref_s = dense64(op)
    k, n = op.shape
    assert (k, n) == (80 * block, 7 * block)
    bias = randn(n, dtype=dtype, device="cuda")
    empty = ref_s.abs().sum(0) == 0
    for m in (1, 100, 300, 1000):
        x = randn(m, k, dtype=dtype, device="cuda")
        out = bsr.dds(x, op, bias)
        ref = x.double() @ ref_s + bias.double()
        assert torch.isfinite(out).all()
        for j in range(7):  # per block column: a wrong group member cannot hide in the average
            cols = slice(j * block, (j + 1) * block)
            assert rel_error(out[:, cols], ref[:, cols]) <= tol(dtype, torch.device("cuda")), (m, j)
        assert torch.equal(out[:, empty], bias[empty].expand(m, -1))
        out = bsr.dds(x, op)
        assert rel_error(out, ref - bias.double()) <= tol(dtype, torch.device("cuda"))
    # Random patterns (the union of a group's columns in chunks of 32 k blocks: entries inside and
    # past a chunk, runs that end at a chunk's edge): 100 k blocks × 9 block columns.
    g = torch.Generator().manual_seed(block + 2 * transpose)
    for density in (0.05, 0.3, 0.9):
        mask = torch.rand(100, 9, generator=g) < density
        if transpose:
            mask = mask.t().contiguous()
        r = BlockSparseMatrix.from_mask(mask, block, dtype=dtype)
        r = r.with_values(randn(*r.values.shape, dtype=dtype)).to("cuda")
        op = r.t() if transpose else r
        x = randn(300, 100 * block, dtype=dtype, device="cuda")
        out = bsr.dds(x, op)
        ref = x.double() @ dense64(op)
        for j in range(9):
            cols = slice(j * block, (j + 1) * block)
            assert rel_error(out[:, cols], ref[:, cols]) <= tol(dtype, torch.device("cuda")), (density, j)
    # Every block mask a group of the grouped kernel can see at a k step (each mask's wgmmas are
    # issued by their own compile-time case): with g = 128 / block columns per group, group q's
    # column q·g + i holds k block kk iff bit i of (kk + q) mod 2^g is set; 8 block columns.
    group = max(1, 128 // block)
    kb = 2 << group
    mask = torch.zeros(kb, 8, dtype=torch.bool)
    for j in range(8):
        q, i = divmod(j, group)
        for kk in range(kb):
            mask[kk, j] = bool((((kk + q) % (1 << group)) >> i) & 1)
    if transpose:
        mask = mask.t().contiguous()
    r = BlockSparseMatrix.from_mask(mask, block, dtype=dtype)
    r = r.with_values(randn(*r.values.shape, dtype=dtype)).to("cuda")
    op = r.t() if transpose else r
    x = randn(300, kb * block, dtype=dtype, device="cuda")
    out = bsr.dds(x, op)
    ref = x.double() @ dense64(op)
    for j in range(8):
        cols = slice(j * block, (j + 1) * block)
        assert rel_error(out[:, cols], ref[:, cols]) <= tol(dtype, torch.device("cuda")), ("every mask", j)


@pytest.mark.cuda
@pytest.mark.parametrize("block", [64, 128])
@pytest.mark.parametrize("transpose", [False, True], ids=["S", "St"])
def test_dds_grouped_edges_tf32(block, transpose):
    """The same cases in fp32 with TF32 allowed: blocks of 64/128 take the grouped kernel's tf32
    instantiations (wgmma reads tf32 K-major only: with Bop = S, on copies of the blocks
    transposed into the workspace)."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        test_dds_grouped_edges(block, torch.float32, transpose)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


@pytest.mark.cuda
@pytest.mark.parametrize("block", [32, 128])
@pytest.mark.parametrize("n_cols", [40, 257, 600])
def test_dds_many_columns(block, n_cols):
    """Block columns past the 256 that a CTA orders heaviest first (the tile schedule then keeps
    the rotated order: 257 and 600 columns for the one-column kernel, 600 / (128 / b) groups for the
    grouped one) and below it; skewed column weights (column j holds about j mod 7 blocks), empty
    columns included; checked per block column against float64."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    kb = 8
    g = torch.Generator().manual_seed(n_cols + block)
    weight = torch.arange(n_cols) % 7
    mask = torch.rand(kb, n_cols, generator=g) < weight / 7.0  # (k blocks, block columns)
    for dtype in (torch.float16, torch.bfloat16):
        s = BlockSparseMatrix.from_mask(mask, block, dtype=dtype)
        s = s.with_values(randn(*s.values.shape, dtype=dtype)).to("cuda")
        x = randn(300, kb * block, dtype=dtype, device="cuda")
        out = bsr.dds(x, s)
        ref = x.double() @ dense64(s)
        for j in range(0, n_cols, max(1, n_cols // 50)):
            cols = slice(j * block, (j + 1) * block)
            assert rel_error(out[:, cols], ref[:, cols]) <= tol(dtype, torch.device("cuda")), (dtype, j)
        assert rel_error(out, ref) <= tol(dtype, torch.device("cuda"))


@pytest.mark.cuda
@pytest.mark.parametrize("block", [32, 64, 128])
def test_dds_panels_and_bias_offset(block):
    """2300 rows (nine 256-row panels, the last ragged: under the heavy-first schedule, which hands
    the grouped kernel's tiles out in chunks of four panels ordered by column weight, two whole
    chunks and a partial one), skewed column weights with empty columns, and a bias that starts at
    an odd element (its pairs then cannot be read as 32-bit words) next to an aligned one; checked
    per block column against float64."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    kb, nb, m = 12, 1024 // block, 2300
    g = torch.Generator().manual_seed(block)
    mask = torch.rand(kb, nb, generator=g) < (torch.arange(nb) % 5) / 10.0  # column j: ~(j mod 5)/10 full
    for dtype in (torch.float16, torch.bfloat16):
        s = BlockSparseMatrix.from_mask(mask, block, dtype=dtype)
        s = s.with_values(randn(*s.values.shape, dtype=dtype)).to("cuda")
        x = randn(m, kb * block, dtype=dtype, device="cuda")
        n = nb * block
        for bias in (randn(n, dtype=dtype, device="cuda"), randn(n + 1, dtype=dtype, device="cuda")[1:]):
            out = bsr.dds(x, s, bias)
            ref = x.double() @ dense64(s) + bias.double()
            for j in range(nb):
                cols = slice(j * block, (j + 1) * block)
                assert rel_error(out[:, cols], ref[:, cols]) <= tol(dtype, torch.device("cuda")), (dtype, j)


def test_dds_workspace_checked():
    """DdsParams::workspace, when given, must hold bsr_dds_workspace_bytes() bytes, 4-byte aligned."""
    s = make_matrix(64, 64, 32, 0.5, torch.float32, torch.device("cpu"))
    x = torch.randn(4, 64)
    out = torch.empty(4, 64)
    buf = torch.zeros(64, dtype=torch.uint8)
    need = _C.bsr_dds_workspace_bytes()
    assert need >= 4
    ro, ci, _, co, rbc, bbc = s.index_sets()
    dl = torch.utils.dlpack.to_dlpack

    def args():  # fresh capsules per call (a capsule is consumed by the call that takes it)
        return (dl(x), dl(s.values), 64, 64, 32, None, dl(ci), dl(co), dl(rbc), dl(bbc), False, None, dl(out),
                False, 0)
    with pytest.raises(ValueError, match="`workspace` must hold at least"):
        _C.bsr_dds(*args(), buf.data_ptr(), need - 1)
    with pytest.raises(ValueError, match="`workspace` must be 4-byte aligned"):
        _C.bsr_dds(*args(), buf.data_ptr() + 2, need)
    _C.bsr_dds(*args(), buf.data_ptr(), need)  # on the CPU a valid workspace is ignored
    assert rel_error(out, x.double() @ dense64(s)) <= tol(torch.float32, torch.device("cpu"))


def test_tf32_workspace_sizes():
    """bsr_dds_workspace_bytes / bsr_sdd_workspace_bytes without a CUDA device: the tile counter
    alone (dds), nothing (sdd)."""
    base = _C.bsr_dds_workspace_bytes()
    assert base == _C.bsr_dds_workspace_bytes(40, 64, False, True, -1)
    assert _C.bsr_sdd_workspace_bytes(2048, 100, 2048, 64, 1024, True, -1) == 0


@pytest.mark.cuda
def test_tf32_workspace_sizes_cuda():
    """On a CUDA device: the tile counter alone (dds) or nothing (sdd) where no copy is made
    (op(S) = Sᵀ, TF32 off, blocks of 32, an sdd pattern too sparse to repay the copies); where
    bsr_tf32_wgmma says the Hopper kernels run, room for the transposed blocks / operands (the
    operands only for blocks of 128). The sdd patterns stay below the dense path's density (its
    workspace would be the dense product's instead, test_sdd_dense_workspace_query)."""
    if not (torch.cuda.is_available() and sparsekern.cuda_available()):
        pytest.skip("needs CUDA")
    base = _C.bsr_dds_workspace_bytes()
    dev = torch.cuda.current_device()
    assert not _C.bsr_tf32_wgmma(dev, 32) and not _C.bsr_tf32_wgmma(dev, 16)
    # S of 640 × 640 (10 block columns of 64): 40 blocks, 4 per column.
    assert _C.bsr_dds_workspace_bytes(40, 64, True, True, dev, 640, 640) == base
    assert _C.bsr_dds_workspace_bytes(40, 64, False, False, dev, 640, 640) == base
    assert _C.bsr_dds_workspace_bytes(40, 32, False, True, dev, 1280, 1280) == base
    assert _C.bsr_dds_workspace_bytes(14, 64, False, True, dev, 640, 640) == base  # 1.4 blocks per column
    assert _C.bsr_sdd_workspace_bytes(2048, 100, 2048, 64, 1024, False, dev) == 0
    assert _C.bsr_sdd_dense_bytes(2048, 100, 2048, 32, 256, True, dev, "float32") == 0
    assert _C.bsr_sdd_workspace_bytes(2048, 100, 2048, 32, 256, True, dev) == 0
    assert _C.bsr_sdd_workspace_bytes(2048, 100, 2048, 64, 100, True, dev) == 0  # too sparse
    for block in (64, 128):
        wgmma = _C.bsr_tf32_wgmma(dev, block)
        hopper = torch.cuda.get_device_capability(dev) == (9, 0)
        assert not wgmma or hopper
        dds_need = _C.bsr_dds_workspace_bytes(40, block, False, True, dev, 10 * block, 10 * block)
        # a quarter (b = 64) or half (b = 128) of the 2048 × 2048 pattern's blocks
        nnz = (2048 // block) ** 2 // (4 if block == 64 else 2)
        assert _C.bsr_sdd_dense_bytes(2048, 100, 2048, block, nnz, True, dev, "float32") == 0
        sdd_need = _C.bsr_sdd_workspace_bytes(2048, 100, 2048, block, nnz, True, dev)
        if wgmma:  # the blocks after a 256-byte counter area; a and b with k padded to 4
            assert dds_need == 256 + 40 * block * block * 4
            # The sdd copies only for blocks of 128 (with blocks of 64 the SM80 kernel is as fast
            # as copies + wgmma at every density the sparse path takes; SPARSEKERN_BSR_SDD_WGMMA=1
            # forces them: test_sdd_wgmma_each).
            assert sdd_need == ((2048 * 100 * 4 + 255) // 256 * 256 + 2048 * 100 * 4 if block == 128 else 0)
        else:
            assert dds_need == base and sdd_need == 0


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=lambda d: str(d)[6:])
def test_bias_gradient_column_sums(dtype):
    """The bias gradient's column sums (a GEMV against a cached ones vector on CUDA) against float64,
    for row counts that grow and shrink the cached vector, a strided gradient and an empty one."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    for m, n in ((7, 96), (3000, 64), (5, 32), (1, 8), (0, 16)):
        g = randn(m, n, dtype=dtype, device="cuda")
        for view in (g, g[:, ::2]):
            out = bsr._column_sums(view)
            assert out.shape == (view.shape[1],) and out.dtype == dtype
            ref = view.double().sum(0)
            assert rel_error(out, ref) <= tol(dtype, torch.device("cuda")) or ref.abs().max() == 0, (m, n)


@pytest.mark.cuda
def test_bias_column_sums_outlive_a_larger_batch():
    """A CUDA graph captured over the bias gradient's GEMV reads the cached ones vector at every
    replay; a larger batch afterwards grows the cache, and the vector the graph reads must stay
    alive (freed, its memory would be handed to the next allocation of its size on that stream:
    a wrong bias gradient, silently)."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g1 = randn(1500, 64, dtype=torch.float32, device="cuda")
        bsr._column_sums(g1)  # this stream's ones vector, 1500 rows
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            out = bsr._column_sums(g1)
        assert bsr._has_ones(g1)
        bsr._column_sums(randn(5000, 64, dtype=torch.float32, device="cuda"))  # grows the cache
        junk = [torch.full((1500,), 3.0, device="cuda") for _ in range(32)]  # the old vector's size
        out.zero_()
        graph.replay()
    torch.cuda.synchronize()
    assert rel_error(out, g1.double().sum(0)) <= tol(torch.float32, torch.device("cuda"))
    del junk


@pytest.mark.cuda
@pytest.mark.parametrize("block", [64, 128])
@pytest.mark.parametrize("layouts", ["col-row", "row-col", "row-row", "col-col"])
@pytest.mark.parametrize("copies", [True, False], ids=["copies", "no-copies"])
def test_sdd_tf32_layouts(block, layouts, copies, monkeypatch):
    """tf32 sdd with `a` and `b` in each layout, with and without the workspace for K-major copies
    (on Hopper: the wgmma kernel on copies, or on operands given K-major, i.e. `a` row-major and
    `b` column-major; without copies the SM80 kernel), k a multiple of 32 and not, a lone-block
    and a random pattern, and a 4096² one dense enough for the copies to pay (at b = 128), against
    float64."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    monkeypatch.setattr(bsr, "_tf32_copies", copies)
    monkeypatch.setattr(bsr, "_sdd_dense", False)  # the dense pattern would take the cuBLAS path
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(block)
    lone = torch.zeros(5, 3, dtype=torch.bool)
    lone[3, 1] = True
    # The last pattern holds enough blocks for the copies to pay at b = 128 (bsr_sdd_workspace_bytes
    # > 0; at b = 64 only under SPARSEKERN_BSR_SDD_WGMMA=1, test_sdd_wgmma_each).
    big = 4096 // block
    masks = [torch.rand(5, 3, generator=g) < 0.5, lone, torch.rand(big, big, generator=g) < 0.8]
    for mask in masks:
        rb, cb = mask.shape
        pattern = make_matrix(rb * block, cb * block, block, 0.5, torch.float32, dev, mask=mask)
        dense_mask = pattern.mask().repeat_interleave(block, 0).repeat_interleave(block, 1)
        for k in ((32, 200, 1000) if rb < 10 else (200,)):
            a = randn(rb * block, k, device=dev)
            b = randn(k, cb * block, device=dev)
            la, lb = layouts.split("-")
            a_in = a if la == "row" else a.t().contiguous().t()
            b_in = b if lb == "row" else b.t().contiguous().t()
            out = bsr.sdd(a_in, b_in, pattern)
            ref = (a.double() @ b.double()) * dense_mask
            assert rel_error(out.to_dense(), ref) <= tol(torch.float32, dev), (k, layouts)


@pytest.mark.cuda
@pytest.mark.parametrize("block", [64, 128])
@pytest.mark.parametrize("copies", [True, False], ids=["copies", "no-copies"])
@pytest.mark.parametrize("size", ["small", "dense"])
def test_linear_tf32_backward(block, copies, size, monkeypatch):
    """BlockSparseLinear in fp32 with TF32: output, input, weight and bias gradients against
    float64, with the transposed copies (Hopper: dX on wgmma; dW too for the 2048² layer at
    d = 0.9 with blocks of 128, whose pattern repays the copies) and without (SM80 kernels), an odd
    batch."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    monkeypatch.setattr(bsr, "_tf32_copies", copies)
    monkeypatch.setattr(bsr, "_sdd_dense", False)  # d = 0.9 would take the cuBLAS path
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    dev = torch.device("cuda")
    torch.manual_seed(block)
    k_in, n_out, density = (6 * block, 4 * block, 0.3) if size == "small" else (2048, 2048, 0.9)
    layer = BlockSparseLinear(k_in, n_out, density=density, block_size=block, device=dev)
    x = torch.randn(129, k_in, device=dev, requires_grad=True)
    y = layer(x)
    go = torch.randn_like(y)
    gx, gw, gb = torch.autograd.grad(y, (x, layer.weight, layer.bias), go)
    dense_w = layer.to_dense_linear().weight.detach().double()
    rows, cols = layer.block_row_indices.long(), layer.block_col_indices.long()
    ref_y = x.double() @ dense_w.t() + layer.bias.double()
    assert rel_error(y, ref_y) <= tol(torch.float32, dev)
    assert rel_error(gx, go.double() @ dense_w) <= tol(torch.float32, dev)
    grid = (go.double().t() @ x.double()).reshape(n_out // block, block, k_in // block, block).permute(0, 2, 1, 3)
    assert rel_error(gw, grid[rows, cols]) <= tol(torch.float32, dev)
    assert rel_error(gb, go.double().sum(0)) <= tol(torch.float32, dev)


# (label, dtype or "tf32", block, density, m, k, n): each takes a different host path into the
# kernels. bf16 b = 64 at 4096 rows: the sm_90a dds with tiles handed out from the tile counter
# (its memset is part of the call); b = 32 at d = 0.6: the dds's and the sdd's dense paths (a
# workspace allocated per call, cuBLAS inside the capture); tf32 b = 128 at d = 0.9: the
# transposed copies into a per-call workspace; fp16 b = 16: the HMMA kernels, an odd batch.
_CAPTURE_CASES = [("bf16-b64-tiles", torch.bfloat16, 64, 0.5, 4096, 512, 4096),
                  ("bf16-b32-dense-paths", torch.bfloat16, 32, 0.6, 1500, 512, 512),
                  ("tf32-b128-copies", "tf32", 128, 0.9, 129, 2048, 2048),
                  ("fp16-b16", torch.float16, 16, 0.3, 7, 256, 384)]


@pytest.mark.cuda
@pytest.mark.parametrize("case", _CAPTURE_CASES, ids=[c[0] for c in _CAPTURE_CASES])
def test_linear_cuda_graph_capture(case, monkeypatch):
    """BlockSparseLinear's forward and its three gradients captured in one CUDA graph (serving and
    training loops do this): the capture succeeds (nothing in the call synchronises or allocates
    outside torch's allocator), and replays on new inputs copied into the captured tensors give the
    float64 results of those inputs, twice (the tile counter and workspaces are reset inside the
    graph, not only on the eager path)."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    _, dtype, block, density, m, k, n = case
    if dtype == "tf32":
        monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
        dtype = torch.float32
    dev = torch.device("cuda")
    torch.manual_seed(block)
    layer = BlockSparseLinear(k, n, density=density, block_size=block, device=dev, dtype=dtype)
    x = torch.randn(m, k, device=dev, dtype=dtype, requires_grad=True)
    go = torch.randn(m, n, device=dev, dtype=dtype)
    params = (x, layer.weight, layer.bias)

    def step():
        y = layer(x)
        return (y, *torch.autograd.grad(y, params, go))

    # capture_graph also checks that no per-stream cache kept a buffer of the graph's pool
    # (torch.compile's mode="reduce-overhead" refuses such graphs: test_compile_reduce_overhead).
    graph, outs = capture_graph(step)

    dense_w = layer.to_dense_linear().weight.detach().double()
    rows, cols = layer.block_row_indices.long(), layer.block_col_indices.long()
    t = tol(dtype, dev)
    for _ in range(2):
        with torch.no_grad():
            x.copy_(torch.randn_like(x))
            go.copy_(torch.randn_like(go))
        graph.replay()
        torch.cuda.synchronize()
        y, gx, gw, gb = outs
        xd, god = x.detach().double(), go.double()
        assert rel_error(y, xd @ dense_w.t() + layer.bias.double()) <= t
        assert rel_error(gx, god @ dense_w) <= t
        grid = (god.t() @ xd).reshape(n // block, block, k // block, block).permute(0, 2, 1, 3)
        assert rel_error(gw, grid[rows, cols]) <= t
        assert rel_error(gb, god.sum(0)) <= t


_CONCURRENT_CASES = [("bf16-b32-bias", torch.bfloat16, 32, 0.3, 129, 256, 192, True),
                     ("bf16-b128-nobias", torch.bfloat16, 128, 0.25, 300, 512, 384, False),
                     ("fp16-b64-bias", torch.float16, 64, 0.5, 7, 384, 256, True),
                     ("tf32-b64-bias", "tf32", 64, 0.2, 257, 512, 256, True),
                     ("fp32-b16-bias", torch.float32, 16, 0.4, 33, 128, 96, True)]


@pytest.mark.cuda
@pytest.mark.parametrize("case", _CONCURRENT_CASES, ids=[c[0] for c in _CONCURRENT_CASES])
def test_linear_concurrent_grads(case, monkeypatch):
    """With bsr._concurrent_grads (the default), a captured backward runs the weight and bias
    gradients on a side stream of the capturing one: the graph's replays give the same input and
    weight gradients, bit for bit, as the eager backward (kernels in order) and as a capture with the
    switch off, the bias gradient to rounding, and the float64 results."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    _, dtype, block, density, m, k, n, bias = case
    if dtype == "tf32":
        monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
        dtype = torch.float32
    dev = torch.device("cuda")
    torch.manual_seed(block + m)
    layer = BlockSparseLinear(k, n, bias=bias, density=density, block_size=block, device=dev, dtype=dtype)
    params = (layer.weight, layer.bias) if bias else (layer.weight,)
    x = torch.randn(m, k, device=dev, dtype=dtype)
    go = torch.randn(m, n, device=dev, dtype=dtype)

    def step():
        xg = x.clone().requires_grad_()
        return torch.autograd.grad(layer(xg), (xg, *params), go)

    forks = []
    fork = bsr._on_side_stream
    monkeypatch.setattr(bsr, "_on_side_stream", lambda *a: forks.append(1) or fork(*a))
    # The captured bias gradient: capture_graph warms up on a stream of its own and captures on
    # another, which has no ones vector for the GEMV; the library's column-sum pass (next to the
    # weight gradient) sums it there, not torch's sum (_column_sums' way out in a capture).
    sums_in_capture = []
    column_sums = bsr._column_sums
    monkeypatch.setattr(bsr, "_column_sums",
                        lambda *a: (bsr._capturing() and sums_in_capture.append(1)) or column_sums(*a))
    replays = []
    for concurrent in (False, True):
        monkeypatch.setattr(bsr, "_concurrent_grads", concurrent)
        forks.clear()
        graph, outs = capture_graph(step)  # warm-up calls outside the capture, then the capture
        assert len(forks) == (1 if concurrent else 0)  # only the captured call forks, when asked
        assert not sums_in_capture
        for _ in range(2):
            graph.replay()
            torch.cuda.synchronize()
            replays.append([o.clone() for o in outs])
    # The eager reference after the captures: the one failure seen (under compute-sanitizer, with
    # the reference before them) was a capture made to depend on the legacy stream, which is what
    # torch reports when a gradient accumulator made on the default stream is still alive.
    monkeypatch.setattr(bsr, "_concurrent_grads", False)
    in_order = step()
    for outs in replays:
        assert torch.equal(in_order[0], outs[0]) and torch.equal(in_order[1], outs[1])
        if bias:  # the kernel's fused row sums or the library's pass, the eager GEMV: rounding
            assert rel_error(outs[2], in_order[2].double()) <= tol(dtype, dev)

    dense_w = layer.to_dense_linear().weight.detach().double()
    rows, cols = layer.block_row_indices.long(), layer.block_col_indices.long()
    xd, god = x.double(), go.double()
    t = tol(dtype, dev)
    assert rel_error(outs[0], god @ dense_w) <= t
    grid = (god.t() @ xd).reshape(n // block, block, k // block, block).permute(0, 2, 1, 3)
    assert rel_error(outs[1], grid[rows, cols]) <= t
    if bias:
        assert rel_error(outs[2], god.sum(0)) <= t


def test_concurrent_grads_switch():
    """SPARSEKERN_BSR_CONCURRENT_GRADS: on unless set to 0 (read at import)."""
    code = "from sparsekern import bsr; print(bsr._concurrent_grads)"
    assert run_python(code, SPARSEKERN_BSR_CONCURRENT_GRADS="0").stdout.strip() == "False"
    assert run_python(code, SPARSEKERN_BSR_CONCURRENT_GRADS="1").stdout.strip() == "True"
    if "SPARSEKERN_BSR_CONCURRENT_GRADS" not in os.environ:  # the default
        assert run_python(code).stdout.strip() == "True"


_FRESH_THREAD_CODE = r"""
import threading, torch, sparsekern
from torch.profiler import profile, ProfilerActivity
torch.manual_seed(0)
layer = sparsekern.BlockSparseLinear(1024, 1024, density=0.5, block_size=64, device="cuda", dtype=torch.bfloat16)
x = torch.randn(512, 1024, device="cuda", dtype=torch.bfloat16)
go = torch.randn(512, 1024, device="cuda", dtype=torch.bfloat16)
# Blocks of the sizes the calls below allocate, freed: the allocator hands them out again without a
# cudaMalloc (which would bind a context to the calling thread).
spare = [torch.empty_like(x) for _ in range(4)] + [torch.empty_like(layer.weight) for _ in range(4)]
del spare
with torch.no_grad():
    want = layer(x)
torch.cuda.synchronize()
seen = []

def names(fn):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
    seen.append(len(events))
    return "|".join(sorted({n for n in events if "sparsekern" in n}))

def backward():  # the first one in this process runs on a fresh autograd thread
    xg = x.clone().requires_grad_()
    torch.autograd.grad(layer(xg), (xg, layer.weight), go)

got = {}
def in_thread():
    with torch.no_grad():
        got["y"] = layer(x)
print("THREAD", names(lambda: (lambda t: (t.start(), t.join()))(threading.Thread(target=in_thread))))
print("MAIN", names(lambda: layer(x)))
print("BWD1", names(backward))
print("BWD2", names(backward))
print("EQUAL", torch.equal(got["y"], want))
print("KERNELS", min(seen))
"""


@pytest.mark.cuda
def test_fresh_thread_takes_the_same_kernels():
    """A thread whose first CUDA work is a sparsekern op (torch's autograd threads, a user's
    threading.Thread taking cached memory) has no current CUDA context until something binds one;
    the library's device guard binds it, so the sm_90a kernels' TMA descriptors encode there too
    (before, such a call fell back to the SM80 kernels). Same kernels, same result: a forward in a
    new thread against one on the main thread, the process's first backward (on the autograd thread)
    against its second."""
    if not (torch.cuda.is_available() and sparsekern.cuda_available()):
        pytest.skip("needs CUDA")
    out = run_python(_FRESH_THREAD_CODE, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.split(" ", 1) if " " in line else (line, "") for line in out.stdout.splitlines())
    assert lines["EQUAL"] == "True"
    if lines["KERNELS"] == "0":
        pytest.skip("the profiler saw no kernels (it does not under compute-sanitizer)")
    assert lines["THREAD"] == lines["MAIN"]
    assert lines["BWD1"] == lines["BWD2"]
    if torch.cuda.get_device_capability() == (9, 0):
        assert "::sm90::" in lines["MAIN"] and "::sm90::" in lines["BWD2"], (lines["MAIN"], lines["BWD2"])


def test_sdd_dense_workspace_query():
    """bsr_sdd_dense_bytes: 0 without a CUDA device, a clear error for an unknown dtype name."""
    assert _C.bsr_sdd_dense_bytes(4096, 8192, 4096, 32, 8192, False, -1, "bfloat16") == 0
    with pytest.raises(ValueError, match="dtype"):
        _C.bsr_sdd_dense_bytes(64, 64, 64, 32, 4, False, 0, "int8")


@pytest.mark.cuda
def test_sdd_dense_workspace_query_cuda():
    """On CUDA, bsr_sdd_dense_bytes is 0 or room for the m × n product (+ cuBLAS's workspace; in
    TF32 + the smaller operand transposed), and bsr_sdd_workspace_bytes agrees with it wherever it
    is not 0."""
    if not (torch.cuda.is_available() and sparsekern.cuda_available()):
        pytest.skip("needs CUDA")
    dev = torch.cuda.current_device()
    for name, size, tf32 in (("bfloat16", 2, False), ("float16", 2, False), ("float32", 4, True)):
        for block in BLOCKS:
            nb = (4096 // block) ** 2
            for nnz in (1, nb // 10, nb // 2, nb):
                need = _C.bsr_sdd_dense_bytes(4096, 8192, 4096, block, nnz, tf32, dev, name)
                assert need == 0 or need >= 4096 * 4096 * size + (4096 * 8192 * 4 if tf32 else 0), (name, block, nnz, need)
                if need:
                    assert _C.bsr_sdd_workspace_bytes(4096, 8192, 4096, block, nnz, tf32, dev, name) == need
    # a lone block never takes the dense path by default
    assert _C.bsr_sdd_dense_bytes(4096, 8192, 4096, 32, 1, False, dev, "bfloat16") == 0


def _dense_path_setup(kind, monkeypatch):
    """(dtype, device, requested) for the dense-path tests: skips without CUDA, allows TF32 for
    "tf32", and records the byte counts of every workspace the Python layer asks for in
    `requested`."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", kind == "tf32")
    requested = []
    real = bsr._try_workspace

    def spy(nbytes, device):
        requested.append(nbytes)
        return real(nbytes, device)
    monkeypatch.setattr(bsr, "_try_workspace", spy)
    return (torch.float32 if kind == "tf32" else kind), torch.device("cuda"), requested


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["tf32", torch.float16, torch.bfloat16], ids=_dtype_id)
@pytest.mark.parametrize("block", [16, 32, 64])
def test_sdd_dense_path(kind, block, monkeypatch):
    """sdd through the dense path (the whole product by cuBLAS into the workspace, the pattern's
    blocks copied out), which a dense pattern of small blocks takes on Hopper: every layout of
    `a` and `b` (a weight gradient's dYᵀ and X, row-/column-major, a strided view that cuBLAS
    cannot read), odd k, m > n and m < n (in TF32 the weight gradient's layouts transpose the
    smaller operand first: B, then A), and in TF32 a workspace without room for that copy (the
    product on the operands as given), against float64; the same products with the dense path
    withheld agree."""
    dtype, dev, requested = _dense_path_setup(kind, monkeypatch)
    g = torch.Generator().manual_seed(block)
    real_dense_bytes = bsr._sdd_dense_bytes

    def without_copy(a, b, like_values, tf32):  # the TF32 operand copy's room taken away
        need = real_dense_bytes(a, b, like_values, tf32)
        k4 = (a.shape[1] + 3) // 4 * 4
        return need - (min(a.shape[0], b.shape[1]) * k4 * 4 + 255) // 256 * 256 if need else 0
    for (rows, cols), mask_kind in (((512, 384), "ones"), ((512, 384), "rand"), ((384, 512), "rand")):
        rb, cb = rows // block, cols // block
        mask = torch.ones(rb, cb, dtype=torch.bool) if mask_kind == "ones" else torch.rand(rb, cb, generator=g) < 0.7
        pattern = make_matrix(rows, cols, block, 0.5, dtype, dev, mask=mask)
        dense_mask = pattern.mask().repeat_interleave(block, 0).repeat_interleave(block, 1).to(dev)
        dense_bytes = _C.bsr_sdd_dense_bytes(rows, 136, cols, block, pattern.nnz_blocks,
                                             kind == "tf32", dev.index or 0, sparsekern._core.dtype_name(dtype))
        for k in (136, 1001):
            a = randn(rows, k, dtype=dtype, device=dev)
            b = randn(k, cols, dtype=dtype, device=dev)
            ref = (a.double() @ b.double()) * dense_mask
            for a_in, b_in in ((a.t().contiguous().t(), b), (a, b.t().contiguous().t()),
                               (randn(rows, 2 * k, dtype=dtype, device=dev)[:, ::2].copy_(a), b)):
                requested.clear()
                monkeypatch.setattr(bsr, "_sdd_dense", True)
                out = bsr.sdd(a_in, b_in, pattern)
                assert rel_error(out.to_dense(), ref) <= tol(dtype, dev), (k, a_in.stride(), b_in.stride())
                if dense_bytes and k == 136:
                    assert requested and requested[0] == dense_bytes
                if kind == "tf32" and dense_bytes:
                    monkeypatch.setattr(bsr, "_sdd_dense_bytes", without_copy)
                    out3 = bsr.sdd(a_in, b_in, pattern)
                    monkeypatch.setattr(bsr, "_sdd_dense_bytes", real_dense_bytes)
                    assert rel_error(out3.to_dense(), ref) <= tol(dtype, dev), (k, "no room for the copy")
                monkeypatch.setattr(bsr, "_sdd_dense", False)
                out2 = bsr.sdd(a_in, b_in, pattern)
                assert rel_error(out2.to_dense(), ref) <= tol(dtype, dev)
    if torch.cuda.get_device_capability(dev) == (9, 0) and sparsekern.cuda_available():
        # a fully dense pattern of these blocks takes the dense path on Hopper by default
        assert _C.bsr_sdd_dense_bytes(512, 136, 384, block, rb * cb, kind == "tf32", dev.index or 0,
                                      sparsekern._core.dtype_name(dtype)) > 0


def test_dds_dense_workspace_query():
    """bsr_dds_dense_bytes: 0 without a CUDA device, a clear error for an unknown dtype name."""
    assert _C.bsr_dds_dense_bytes(8192, 32, True, False, -1, 4096, 4096, 8192, "bfloat16") == 0
    with pytest.raises(ValueError, match="dtype"):
        _C.bsr_dds_dense_bytes(4, 32, True, False, 0, 64, 64, 64, "int8")


@pytest.mark.cuda
def test_dds_dense_workspace_query_cuda():
    """On CUDA, bsr_dds_dense_bytes is 0 or room for op(S) dense after the tile-counter area
    (+ cuBLAS's workspace), which bsr_dds_workspace_bytes then returns too; few rows or a lone
    block never take the dense path by default."""
    if not (torch.cuda.is_available() and sparsekern.cuda_available()):
        pytest.skip("needs CUDA")
    dev = torch.cuda.current_device()
    for name, size, tf32 in (("bfloat16", 2, False), ("float16", 2, False), ("float32", 4, True)):
        for block in BLOCKS:
            nb = (4096 // block) ** 2
            for nnz in (1, nb // 10, nb // 2, nb):
                for transpose in (True, False):
                    need = _C.bsr_dds_dense_bytes(nnz, block, transpose, tf32, dev, 4096, 4096, 8192, name)
                    assert need == 0 or need >= 256 + 4096 * 4096 * size, (name, block, nnz, need)
                    if need:
                        assert _C.bsr_dds_workspace_bytes(nnz, block, transpose, tf32, dev, 4096, 4096, 8192,
                                                          name) == need
        assert _C.bsr_dds_dense_bytes(1, 32, True, tf32, dev, 4096, 4096, 8192, name) == 0
        assert _C.bsr_dds_dense_bytes((4096 // 32) ** 2, 32, True, tf32, dev, 4096, 4096, 16, name) == 0


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["tf32", torch.float16, torch.bfloat16], ids=_dtype_id)
@pytest.mark.parametrize("block", [16, 32])
@pytest.mark.parametrize("transpose", [False, True], ids=["S", "St"])
def test_dds_dense_path(kind, block, transpose, monkeypatch):
    """dds through the dense path (op(S) written dense into the workspace, one cuBLAS product, the
    bias written into C first), which a dense pattern of small blocks with enough rows takes on
    Hopper: op(S) = S and Sᵀ, with and without bias, `a` row- and column-major, a random pattern
    with empty block columns, odd rows (1031), against float64; the same products with the dense
    path withheld agree."""
    dtype, dev, requested = _dense_path_setup(kind, monkeypatch)
    g = torch.Generator().manual_seed(block + transpose)
    rb, cb = 256 // block, 384 // block
    holes = torch.rand(rb, cb, generator=g) < 0.8
    holes[:, 1] = False  # an empty block column
    holes[2, :] = False  # and an empty block row
    m = 1031
    for mask in (torch.ones(rb, cb, dtype=torch.bool), holes):
        s = make_matrix(rb * block, cb * block, block, 0.5, dtype, dev, mask=mask)
        op = s.t() if transpose else s
        k, n = op.shape
        dense_op = dense64(op).to(dev)
        want = _C.bsr_dds_dense_bytes(s.nnz_blocks, block, transpose, kind == "tf32", dev.index or 0,
                                      rb * block, cb * block, m, sparsekern._core.dtype_name(dtype))
        x = randn(m, k, dtype=dtype, device=dev)
        bias = randn(n, dtype=dtype, device=dev)
        for x_in in (x, x.t().contiguous().t()):
            for b_in in (None, bias):
                ref = x.double() @ dense_op + (0 if b_in is None else b_in.double())
                requested.clear()
                monkeypatch.setattr(bsr, "_dds_dense", True)
                out = bsr.dds(x_in, op, b_in)
                assert rel_error(out, ref) <= tol(dtype, dev), (mask.all().item(), x_in.stride(), b_in is None)
                if want:
                    assert want in requested
                monkeypatch.setattr(bsr, "_dds_dense", False)
                out2 = bsr.dds(x_in, op, b_in)
                assert rel_error(out2, ref) <= tol(dtype, dev)
        if mask.all() and torch.cuda.get_device_capability(dev) == (9, 0) and sparsekern.cuda_available():
            assert want > 0  # a fully dense pattern of these blocks takes the dense path by default


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=_dtype_id)
def test_linear_dense_paths(dtype, monkeypatch):
    """BlockSparseLinear (blocks of 32 at d = 0.9, 1100 rows: on Hopper the forward, the input
    gradient and the weight gradient all take the dense paths by default) against float64."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    dev = torch.device("cuda")
    torch.manual_seed(7)
    layer = BlockSparseLinear(512, 384, density=0.9, block_size=32, device=dev, dtype=dtype)
    x = torch.randn(1100, 512, device=dev, dtype=dtype, requires_grad=True)
    y = layer(x)
    go = torch.randn_like(y)
    gx, gw, gb = torch.autograd.grad(y, (x, layer.weight, layer.bias), go)
    w = layer.to_dense_linear().weight.detach().double()
    rows, cols = layer.block_row_indices.long(), layer.block_col_indices.long()
    assert rel_error(y, x.double() @ w.t() + layer.bias.double()) <= tol(dtype, dev)
    assert rel_error(gx, go.double() @ w) <= tol(dtype, dev)
    grid = (go.double().t() @ x.double()).reshape(12, 32, 16, 32).permute(0, 2, 1, 3)
    assert rel_error(gw, grid[rows, cols]) <= tol(dtype, dev)
    assert rel_error(gb, go.double().sum(0)) <= tol(dtype, dev)


def _simulate_oom(monkeypatch) -> list:
    """Skips without CUDA; else every workspace allocation of the bsr layer raises
    torch.OutOfMemoryError from now on, recorded in the returned list."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    calls = []

    def oom(*args, **kwargs):
        calls.append(args)
        raise torch.OutOfMemoryError("simulated")
    monkeypatch.setattr(bsr, "_empty", oom)
    return calls


@pytest.mark.cuda
def test_dds_dense_path_falls_back_when_the_workspace_cannot_be_allocated(monkeypatch):
    """The dense path's workspace running out of memory (simulated) leaves the dds to the
    block-sparse kernels, with the same result."""
    calls = _simulate_oom(monkeypatch)
    dev = torch.device("cuda")
    s = make_matrix(512, 512, 32, 1.0, torch.bfloat16, dev)
    x = randn(1500, 512, dtype=torch.bfloat16, device=dev)
    bias = randn(512, dtype=torch.bfloat16, device=dev)
    out = bsr.dds(x, s.t(), bias)
    assert rel_error(out, x.double() @ dense64(s).to(dev).t() + bias.double()) <= tol(torch.bfloat16, dev)
    if _C.bsr_dds_dense_bytes(s.nnz_blocks, 32, True, False, dev.index or 0, 512, 512, 1500, "bfloat16"):
        assert calls  # the dense path was wanted, and refused


@pytest.mark.cuda
def test_sdd_dense_path_falls_back_when_the_workspace_cannot_be_allocated(monkeypatch):
    """The dense path's workspace (the size of the dense product) running out of memory (simulated)
    leaves the product to the sampled kernels, with the same result."""
    calls = _simulate_oom(monkeypatch)
    dev = torch.device("cuda")
    pattern = make_matrix(512, 512, 32, 1.0, torch.bfloat16, dev)
    a = randn(512, 300, dtype=torch.bfloat16, device=dev)
    b = randn(300, 512, dtype=torch.bfloat16, device=dev)
    out = bsr.sdd(a.t().contiguous().t(), b, pattern)
    assert rel_error(out.to_dense(), a.double() @ b.double()) <= tol(torch.bfloat16, dev)
    if _C.bsr_sdd_dense_bytes(512, 300, 512, 32, pattern.nnz_blocks, False, dev.index or 0, "bfloat16"):
        assert calls  # the dense path was wanted, and refused


@pytest.mark.cuda
def test_tf32_copies_fall_back_when_the_workspace_cannot_be_allocated(monkeypatch):
    """A workspace allocation that runs out of memory (simulated) is not the caller's failure: the
    products run without the copies (SM80 kernels) and the gradients stay right."""
    calls = _simulate_oom(monkeypatch)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    test_linear_tf32_backward(128, True, "dense", monkeypatch)
    if _C.bsr_tf32_wgmma(torch.cuda.current_device(), 128):
        assert calls  # the copies were wanted, and refused


@pytest.mark.cuda
@pytest.mark.parametrize("env", [dict(SPARSEKERN_BSR_GROUPED="1", SPARSEKERN_BSR_SCHEDULE="heavy"),
                                 dict(SPARSEKERN_BSR_GROUPED="0", SPARSEKERN_BSR_SCHEDULE="heavy"),
                                 dict(SPARSEKERN_BSR_GROUPED="1", SPARSEKERN_BSR_SCHEDULE="static"),
                                 dict(SPARSEKERN_BSR_GROUPED="0", SPARSEKERN_BSR_SCHEDULE="static"),
                                 dict(SPARSEKERN_BSR_SCHEDULE="dynamic"),
                                 dict(SPARSEKERN_BSR_GROUPED="1", SPARSEKERN_BSR_TMA_STORE="0")],
                         ids=["grouped-heavy", "one-column-heavy", "grouped-static", "one-column-static", "dynamic",
                              "grouped-register-epilogue"])
def test_dds_grouped_edges_each_kernel(env):
    """SPARSEKERN_BSR_GROUPED=1 / 0 (read once per process) forces the grouped sm_90a kernel or the
    one-block-column one for blocks of 32/64/128 (by default the choice depends on the density), and
    SPARSEKERN_BSR_SCHEDULE the tile schedule (heavy: dynamic tiles, heaviest columns first, which
    the default picks for large problems only; static: round-robin, the default's choice at these
    sizes; dynamic: rotated order), and SPARSEKERN_BSR_TMA_STORE=0 the grouped kernel's register
    epilogue instead of its shared-memory + TMA one: the edge cases through each, in a fresh
    process."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    code = (
        "import torch, sys\n"
        "sys.path.insert(0, %r)\n"
        "import test_bsr as t\n"
        "for b in (32, 64, 128):\n"
        "    for dt in (torch.float16, torch.bfloat16):\n"
        "        for tr in (False, True):\n"
        "            t.test_dds_grouped_edges(b, dt, tr)\n"
        "for b in (64, 128):\n"
        "    for tr in (False, True):\n"
        "        t.test_dds_grouped_edges_tf32(b, tr)\n"
        "for b in (32, 128):\n"
        "    for n in (40, 257, 600):\n"
        "        t.test_dds_many_columns(b, n)\n"
        "for b in (32, 64, 128):\n"
        "    t.test_dds_panels_and_bias_offset(b)\n"
        "print('ok')\n" % str(__import__("pathlib").Path(__file__).parent))
    out = run_python(code, timeout=300, **env)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]


@pytest.mark.cuda
@pytest.mark.parametrize("grouped", ["1", "0"])
def test_dds_tile_counter_zeroed_by_the_library(grouped):
    """The dynamic tile schedule's counter is a per-stream buffer that the Python layer allocates
    without zeroing it (a capture allocates its own per call); the library zeroes it on the stream
    before each launch. With the dynamic schedule forced, in a fresh process: a forward after the
    cached counter was filled with garbage, and two replays of a capture on a new stream, against
    float64, through the grouped and the one-block-column kernel."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    code = (
        "import torch, sparsekern\n"
        "from sparsekern import _core\n"
        "from sparsekern.testing import capture_graph\n"
        "torch.manual_seed(0)\n"
        "layer = sparsekern.BlockSparseLinear(1024, 1024, density=0.25, block_size=128, device='cuda',\n"
        "                                     dtype=torch.bfloat16)\n"
        "x = torch.randn(2000, 1024, device='cuda', dtype=torch.bfloat16)\n"
        "ref = x.double() @ layer.dense_weight().double().t() + layer.bias.double()\n"
        "err = lambda y: ((y.double() - ref).norm() / ref.norm()).item()\n"
        "with torch.no_grad():\n"
        "    errs = [err(layer(x))]\n"
        "    assert _core._tile_counters, 'no per-stream tile counter'\n"
        "    for ws in _core._tile_counters.values():\n"
        "        ws[2].fill_(0x55)\n"
        "    errs.append(err(layer(x)))\n"
        "    g, y = capture_graph(lambda: layer(x))  # its capture stream has no cached counter\n"
        "    for _ in range(2):\n"
        "        y.zero_()\n"
        "        g.replay()\n"
        "        errs.append(err(y))\n"
        "print('errs', errs)\n"
        "assert max(errs) < 1e-2, errs\n"
        "print('ok')\n")
    out = run_python(code, timeout=300, SPARSEKERN_BSR_GROUPED=grouped, SPARSEKERN_BSR_SCHEDULE="heavy",
                     SPARSEKERN_BSR_DDS_DENSE="0")
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]


@pytest.mark.cuda
@pytest.mark.parametrize("var", ["SPARSEKERN_BSR_TMA_STORE", "SPARSEKERN_BSR_SCHEDULE"])
def test_dds_env_switch_checked(var):
    """A malformed value of a dds switch read from the environment raises a ValueError naming the
    variable (in a fresh process: the switches are read once), not a silent default."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    code = (
        "import torch\n"
        "from sparsekern import BlockSparseMatrix, bsr\n"
        "s = BlockSparseMatrix.random((256, 256), 64, 0.5, dtype=torch.bfloat16).to('cuda')\n"
        "x = torch.randn(300, 256, dtype=torch.bfloat16, device='cuda')\n"
        "try:\n"
        "    bsr.dds(x, s)\n"
        "except ValueError as e:\n"
        "    print('raised:', e)\n")
    out = run_python(code, timeout=120, **{var: "sometimes"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "raised:" in out.stdout and var in out.stdout and "sometimes" in out.stdout, out.stdout


def _sdd_rejects_switch(name: str, value: str, dtype: str, block: int, a_expr: str, tf32: bool = False):
    """In a fresh process with `name`=`value` (a malformed switch) and the dense sdd path off, an
    sdd of a 128 × 40 `a` (`a_expr` of it) with `a`ᵀ on a 128² pattern of blocks of `block` raises a
    ValueError naming the variable."""
    bad = (
        "import torch\n"
        "from sparsekern import BlockSparseMatrix, bsr\n"
        f"torch.backends.cuda.matmul.allow_tf32 = {tf32}\n"
        f"p = BlockSparseMatrix.random((128, 128), {block}, 0.5, dtype={dtype}).to('cuda')\n"
        f"a = torch.randn(128, 40, dtype={dtype}, device='cuda')\n"
        "try:\n"
        f"    bsr.sdd({a_expr}, a.t().contiguous(), p)\n"
        "except ValueError as e:\n"
        "    print('raised:', e)\n")
    out = run_python(bad, timeout=120, **{name: value, "SPARSEKERN_BSR_SDD_DENSE": "0"})
    assert "raised:" in out.stdout and name in out.stdout, (out.stdout, out.stderr[-2000:])


def _cuda_tests_in_fresh_process(select: str, **env):
    """Runs this file's CUDA tests matching the -k expression `select` in a fresh Python process
    with the environment variables `env` (switches read once per process); asserts they passed."""
    code = (
        "import sys, pytest\n"
        "sys.path.insert(0, %r)\n"
        "code = pytest.main(['-q', '-p', 'no:cacheprovider', '-m', 'cuda', '-k', %r, %r])\n"
        "print('ok' if code == 0 else 'failed')\n"
        % (str(__import__("pathlib").Path(__file__).parent), select, __file__))
    out = run_python(code, timeout=300, **env)
    assert out.returncode == 0 and "ok" in out.stdout and "passed" in out.stdout, (out.stdout[-3000:],
                                                                                   out.stderr[-3000:])


@pytest.mark.cuda
@pytest.mark.parametrize("tm", ["64", "128"])
def test_sdd_whole_block_tiles_each(tm):
    """SPARSEKERN_BSR_SDD_TM=64 / 128 (read once per process) forces 64-row tiles or whole-block
    tiles on the tf32 sdd with blocks of 128 (by default the choice depends on the block count):
    test_sdd_tf32_layouts at b = 128 (every layout, with and without copies, k not a multiple of
    32, a lone block) and test_linear_tf32_backward through each, in a fresh process."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    _cuda_tests_in_fresh_process("(sdd_tf32_layouts or linear_tf32_backward) and 128",
                                 SPARSEKERN_BSR_SDD_TM=tm, SPARSEKERN_BSR_SDD_DENSE="0")


@pytest.mark.cuda
@pytest.mark.parametrize("wgmma", ["0", "1"])
def test_sdd_wgmma_each(wgmma):
    """SPARSEKERN_BSR_SDD_WGMMA=0 / 1 (read once per process) keeps the tf32 sdd on the SM80 kernel
    over the operands as given, or copies them K-major for the wgmma kernel wherever it applies
    (by default only past a density; elsewhere the choice is the same): test_sdd_tf32_layouts and
    test_linear_tf32_backward in a fresh process; a malformed value raises a ValueError naming the
    variable."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    _cuda_tests_in_fresh_process("sdd_tf32_layouts or linear_tf32_backward", SPARSEKERN_BSR_SDD_WGMMA=wgmma,
                                 SPARSEKERN_BSR_SDD_DENSE="0")
    if wgmma == "1":
        _sdd_rejects_switch("SPARSEKERN_BSR_SDD_WGMMA", "2", "torch.float32", 64, "a.t().contiguous().t()",
                            tf32=True)


def _is_hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def _splits_by_default() -> bool:
    """Whether the 16-bit sdd of few blocks over a long K splits K here: on compute capability 9.0
    (the sm_90a kernel) unless SPARSEKERN_BSR_SDD_SPLIT=0 (test_sdd_split_each runs so)."""
    return _is_hopper() and os.environ.get("SPARSEKERN_BSR_SDD_SPLIT", "auto") != "0"


def _coords_pattern(rb, cb, coords, block, dtype, dev):
    """A block-sparse matrix of rb × cb blocks of `block` with blocks at `coords` (random values)."""
    mask = torch.zeros(rb, cb, dtype=torch.bool)
    for r, c in coords:
        mask[r, c] = True
    return make_matrix(rb * block, cb * block, block, 0.5, dtype, dev, mask=mask)


def _check_weight_grad_sdd(pattern, k, dtype, dev):
    """bsr.sdd in a weight gradient's layouts (a column-major as xᵀ is, b row-major) over k rows,
    against float64 on the pattern."""
    (rows, cols), block = pattern.shape, pattern.block_size
    a = randn(k, rows, dtype=dtype, device=dev).t()
    b = randn(k, cols, dtype=dtype, device=dev)
    out = bsr.sdd(a, b, pattern)
    dense_mask = pattern.mask().repeat_interleave(block, 0).repeat_interleave(block, 1)
    ref = (a.double() @ b.double()) * dense_mask
    assert rel_error(out.to_dense(), ref) <= tol(dtype, dev), (rows, cols, k)


@pytest.mark.cuda
@pytest.mark.parametrize("block", [64, 128])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("k", [2048, 1000, 8192])
def test_sdd_split_k(block, dtype, k):
    """The 16-bit sdd of a pattern with few blocks over a long K (a weight gradient of a small
    layer over many rows): on Hopper it splits K into fp32 partials in the workspace and sums them
    in a second kernel. K a multiple of the 64-wide k-step and not (the last split shorter, the
    tail zero-filled), one to a few blocks, the layouts of a weight gradient; against float64."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    dev = torch.device("cuda")
    torch.manual_seed(k + block)
    # Sparse enough that the dense path (cuBLAS + gather) does not take them.
    for rb, cb, coords in ((4, 6, [(0, 1), (2, 5), (3, 0)]), (2, 2, [(1, 0)]), (4, 4, [(0, 3), (1, 3)])):
        pattern = _coords_pattern(rb, cb, coords, block, dtype, dev)
        rows, cols, nnz = rb * block, cb * block, pattern.nnz_blocks
        split_bytes = _C.bsr_sdd_workspace_bytes(rows, k, cols, block, nnz, False, dev.index or 0, str(dtype)[6:])
        if _splits_by_default():  # a handful of 64-row slices against 132 SMs: the rule splits
            assert split_bytes >= 2 * nnz * block * block * 4, (rows, cols, k, split_bytes)
        _check_weight_grad_sdd(pattern, k, dtype, dev)


@pytest.mark.cuda
@pytest.mark.parametrize("split", ["0", "3", "64"])
def test_sdd_split_each(split):
    """SPARSEKERN_BSR_SDD_SPLIT=0 / N (read once per process) never splits K / splits every sdd N
    ways, the 16-bit sm_90a kernel's and the SM80 kernel's (64: more ways than the short products
    have k-steps, so one per k-step): test_sdd_split_k(_sm80), the sm_90a sdd shapes and the
    layer's captured forward + backward through each, in a fresh process; a malformed value raises
    a ValueError naming the variable."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    _cuda_tests_in_fresh_process("(sdd_split_k and not 8192) or sdd_tma_shapes or graph_capture",
                                 SPARSEKERN_BSR_SDD_SPLIT=split, SPARSEKERN_BSR_SDD_DENSE="0")
    if split == "3" and _is_hopper():
        _sdd_rejects_switch("SPARSEKERN_BSR_SDD_SPLIT", "1", "torch.bfloat16", 64, "a")


def _sm80_splits_by_default() -> bool:
    """Whether the SM80 sdd (tf32, 16-bit blocks of 16 / 32, and every block size before Hopper)
    of a few tiles over a long K splits K here: on compute capability 8.0 and up unless
    SPARSEKERN_BSR_SDD_SPLIT=0."""
    return (torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)
            and os.environ.get("SPARSEKERN_BSR_SDD_SPLIT", "auto") != "0")


@pytest.mark.cuda
@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("op_dtype", ["tf32", torch.float16, torch.bfloat16], ids=_dtype_id, indirect=True)
@pytest.mark.parametrize("k", [1000, 4096, 8192])
def test_sdd_split_k_sm80(block, op_dtype, k):
    """The SM80 sdd kernel splits K too where a pattern gives it far fewer tiles than the GPU holds
    (tf32 at every block size, 16-bit blocks of 16 and 32 on Hopper, all sizes on earlier GPUs):
    fp32 partials in the workspace, summed in split order by a second kernel. K with a short last
    k-step (1000) and without; weight-gradient layouts; against float64."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    dtype, dev = op_dtype, torch.device("cuda")
    torch.manual_seed(k + block)
    tf32 = dtype == torch.float32
    # The first pattern is sparse enough that the dense path (cuBLAS + gather) does not take it;
    # the second (d = 1/16) takes it with 16-bit blocks of 16, and is then checked for its result only.
    split_checked = 0
    for rb, cb, coords in ((8, 12, [(0, 1), (2, 5), (7, 0)]), (4, 4, [(1, 0)])):
        pattern = _coords_pattern(rb, cb, coords, block, dtype, dev)
        rows, cols, nnz, name = rb * block, cb * block, pattern.nnz_blocks, str(dtype)[6:]
        split_bytes = _C.bsr_sdd_split_bytes(rows, k, cols, block, nnz, tf32, dev.index or 0, name)
        dense_bytes = _C.bsr_sdd_dense_bytes(rows, k, cols, block, nnz, tf32, dev.index or 0, name)
        sm80_kernel = tf32 or block <= 32 or not _is_hopper()
        if dense_bytes == 0 and sm80_kernel and _sm80_splits_by_default():
            # 1-3 blocks' tiles: far fewer than the five per SM from which it stops splitting
            assert split_bytes >= 2 * nnz * block * block * 4, (rows, cols, k, split_bytes)
            split_checked += 1
        elif dense_bytes:
            assert split_bytes == 0, (rows, cols, k, split_bytes)
        _check_weight_grad_sdd(pattern, k, dtype, dev)
    if _sm80_splits_by_default() and (tf32 or block <= 32 or not _is_hopper()):
        assert split_checked >= 1


def _check_sdd_row_sums(pattern, k, dtype, dev, a_row_major=False):
    """The sdd with the row sums of `a` (SddParams::a_row_sums, a linear layer's bias gradient next
    to its weight gradient): both against float64, `a` column-major as ∂ℓ/∂yᵀ is (or row-major)."""
    (rows, cols), block = pattern.shape, pattern.block_size
    a = randn(rows, k, dtype=dtype, device=dev) if a_row_major else randn(k, rows, dtype=dtype, device=dev).t()
    b = randn(k, cols, dtype=dtype, device=dev)
    vals, sums = bsr._sdd_impl(a, b, pattern.values, pattern.index_sets(), rows, cols, row_sums=True)
    assert sums is not None and sums.shape == (rows,) and sums.dtype == dtype
    ref = a.double().sum(1)
    assert rel_error(sums, ref) <= tol(dtype, dev) or ref.abs().max() == 0, (rows, cols, k)
    if k == 0:
        assert bool((sums == 0).all())
    if pattern.nnz_blocks:
        dense_mask = pattern.mask().repeat_interleave(block, 0).repeat_interleave(block, 1)
        ref_v = (a.double() @ b.double()) * dense_mask
        out = bsr.BlockSparseMatrix(vals, *pattern.index_sets()[:2], shape=(rows, cols), validate=False)
        assert rel_error(out.to_dense(), ref_v) <= tol(dtype, dev) or ref_v.abs().max() == 0, (rows, cols, k)


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("op_dtype", OP_DTYPES, ids=_dtype_id, indirect=True)
def test_sdd_row_sums(device, block, op_dtype):
    """The sdd's fused row sums of `a` on every dtype and block size: a pattern whose block rows hold
    several blocks, one and none (the empty rows come from the column-sum pass on CUDA), over a K
    long enough to split on the GPU, a short K, K = 0, and a pattern without blocks."""
    dtype = op_dtype
    cases = [((5, 4, [(0, 0), (0, 3), (2, 1), (4, 0), (4, 1), (4, 2)]), 1000),
             ((5, 4, [(0, 0), (0, 3), (2, 1), (4, 0), (4, 1), (4, 2)]), 37),
             ((3, 2, [(1, 1)]), 0),
             ((2, 3, []), 100)]
    if device.type == "cuda":
        cases.append(((8, 12, [(0, 1), (2, 5), (7, 0)]), 8192))  # few tiles, long K: split K
    for (rb, cb, coords), k in cases:
        pattern = _coords_pattern(rb, cb, coords, block, dtype, device)
        _check_sdd_row_sums(pattern, k, dtype, device)


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["dense", "tf32-wgmma", "sm90-16bit", "grouped", "ieee", "f64", "row-major"])
def test_sdd_row_sums_unfused_paths(case, monkeypatch):
    """Products that another kernel than the SM80 sdd runs (the dense path, the tf32 wgmma kernel on
    copies, the 16-bit sm_90a kernel, the grouped SM80 kernel, the SIMT kernel for IEEE fp32,
    float64 and a row-major `a`) get their row sums from the column-sum pass: against float64."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    dev = torch.device("cuda")
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", case == "tf32-wgmma")

    def not_fused(pattern, k, dtype, tf32=False):  # what the layer's backward asks before fusing
        (rows, cols), block = pattern.shape, pattern.block_size
        assert not _C.bsr_sdd_row_sums_fused(rows, k, cols, block, pattern.nnz_blocks, tf32, 0, str(dtype)[6:])
    if case == "dense":  # dense enough for the cuBLAS path at blocks of 16 (Hopper), else sampled
        pattern = make_matrix(512, 512, 16, 0.9, torch.bfloat16, dev)
        _check_sdd_row_sums(pattern, 300, torch.bfloat16, dev)
    elif case == "tf32-wgmma":  # enough blocks of 128 for the copies to pay (Hopper; else SM80)
        pattern = make_matrix(4096, 4096, 128, 0.8, torch.float32, dev)
        _check_sdd_row_sums(pattern, 200, torch.float32, dev)
        if _is_hopper():
            not_fused(pattern, 200, torch.float32, True)
    elif case == "sm90-16bit":
        for block in (64, 128):
            pattern = make_matrix(8 * block, 4 * block, block, 0.5, torch.float16, dev)
            _check_sdd_row_sums(pattern, 777, torch.float16, dev)
            if _is_hopper():
                not_fused(pattern, 777, torch.float16)
    elif case == "grouped":  # 16-bit blocks of 32, many blocks: the grouped SM80 sdd
        pattern = make_matrix(4096, 4096, 32, 0.1, torch.bfloat16, dev)
        _check_sdd_row_sums(pattern, 256, torch.bfloat16, dev)
        if pattern.nnz_blocks >= 8 * torch.cuda.get_device_properties(dev).multi_processor_count:
            not_fused(pattern, 256, torch.bfloat16)
    elif case in ("ieee", "f64"):
        dtype = torch.float32 if case == "ieee" else torch.float64
        pattern = _coords_pattern(4, 3, [(0, 0), (3, 2)], 32, dtype, dev)
        _check_sdd_row_sums(pattern, 513, dtype, dev)
        not_fused(pattern, 513, dtype)
    else:
        pattern = _coords_pattern(4, 3, [(0, 0), (3, 2)], 64, torch.bfloat16, dev)
        _check_sdd_row_sums(pattern, 513, torch.bfloat16, dev, a_row_major=True)


@pytest.mark.parametrize("op_dtype", ["tf32", torch.float32, torch.bfloat16], ids=_dtype_id, indirect=True)
def test_linear_bias_grad_fused(device, op_dtype, monkeypatch):
    """The bias gradient of dds(x, Wᵀ, bias) from the weight gradient's sdd (the default) against
    the separate column sums (SPARSEKERN_BSR_FUSED_BIAS_GRAD=0) and float64, with an output block
    row that holds no block (on CUDA its bias gradient comes from the column-sum pass)."""
    dtype, block = op_dtype, 32
    mask = torch.rand(6, 4) < 0.6
    mask[0] = True
    mask[3] = False  # output features 96-127: no weight block
    w = make_matrix(6 * block, 4 * block, block, 0.5, dtype, device, mask=mask)
    w.values.requires_grad_(True)
    bias = randn(6 * block, dtype=dtype, device=device).requires_grad_(True)
    x = randn(333, 4 * block, dtype=dtype, device=device)
    g = randn(333, 6 * block, dtype=dtype, device=device)
    ref_b = g.double().sum(0)
    if device.type == "cuda":  # the HMMA sdd sums the rows itself: tf32 and 16-bit, not IEEE fp32
        tf32 = torch.backends.cuda.matmul.allow_tf32 and dtype == torch.float32
        fused = _C.bsr_sdd_row_sums_fused(6 * block, 333, 4 * block, block, w.nnz_blocks, tf32, device.index or 0,
                                          str(dtype)[6:])
        assert fused == (tf32 or dtype != torch.float32)
    dense_mask = w.mask().repeat_interleave(block, 0).repeat_interleave(block, 1)
    ref_w = (g.double().t() @ x.double()) * dense_mask
    grads = []
    for fused in (True, False):
        monkeypatch.setattr(bsr, "_fused_bias_grad", fused)
        bias.grad = w.values.grad = None
        bsr.dds(x, w.t(), bias).backward(g)
        grads.append(bias.grad.clone())
        gw = bsr.BlockSparseMatrix(w.values.grad, *w.index_sets()[:2], shape=w.shape, validate=False)
        assert rel_error(gw.to_dense(), ref_w) <= tol(dtype, device), fused
    for gb in grads:
        assert rel_error(gb, ref_b) <= tol(dtype, device)
    assert rel_error(grads[0], grads[1].double()) <= tol(dtype, device)


@pytest.mark.cuda
@pytest.mark.parametrize("op_dtype", ["tf32", torch.bfloat16], ids=_dtype_id, indirect=True)
def test_sdd_row_sums_without_split_room(op_dtype, monkeypatch):
    """A product that would split K but gets no room for the split partials (their allocation
    refused) runs unsplit; its fused row sums then hold one split's partials, and the finish pass
    must add exactly those (not the room it had for more)."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    dtype, dev = op_dtype, torch.device("cuda")
    pattern = _coords_pattern(8, 12, [(0, 1), (2, 5), (7, 0)], 32, dtype, dev)
    (rows, cols), k = pattern.shape, 8192
    tf32 = dtype == torch.float32
    split_bytes = _C.bsr_sdd_split_bytes(rows, k, cols, 32, pattern.nnz_blocks, tf32, 0, str(dtype)[6:])
    refused = []
    real = bsr._try_workspace

    def no_split_room(nbytes, device):
        if split_bytes and nbytes == split_bytes:
            refused.append(nbytes)
            return None
        return real(nbytes, device)
    monkeypatch.setattr(bsr, "_try_workspace", no_split_room)
    _check_sdd_row_sums(pattern, k, dtype, dev)
    if _sm80_splits_by_default():
        assert refused  # the partials were wanted, and refused


def test_sdd_row_sums_bad_input():
    """The binding's checks of a_row_sums: it needs block_row_offsets, one element per row, the
    dtype of the product."""
    from sparsekern._core import as_dlpack
    pattern = _coords_pattern(2, 2, [(0, 1)], 16, torch.float32, torch.device("cpu"))
    ro, ci, ri = pattern.index_sets()[:3]
    a, b = torch.randn(32, 8), torch.randn(8, 32)
    out = torch.empty_like(pattern.values)

    def args():  # fresh capsules per call (a DLPack capsule is consumed once)
        return (as_dlpack(a), as_dlpack(b), 32, 32, 16, as_dlpack(ri), as_dlpack(ci), as_dlpack(out))
    with pytest.raises(ValueError, match="block_row_offsets"):
        _C.bsr_sdd(*args(), a_row_sums=as_dlpack(torch.empty(32)))
    with pytest.raises(ValueError, match="a_row_sums"):
        _C.bsr_sdd(*args(), block_row_offsets=as_dlpack(ro), a_row_sums=as_dlpack(torch.empty(31)))
    with pytest.raises(TypeError, match="a_row_sums"):
        _C.bsr_sdd(*args(), block_row_offsets=as_dlpack(ro), a_row_sums=as_dlpack(torch.empty(32, dtype=torch.float64)))
    sums = torch.empty(32)
    _C.bsr_sdd(*args(), block_row_offsets=as_dlpack(ro), a_row_sums=as_dlpack(sums))
    assert torch.allclose(sums, a.sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
def test_sdd_row_sums_workspace_checked():
    """On CUDA a_row_sums needs its workspace: none, or too few bytes, is an error naming it (not a
    fault)."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from sparsekern._core import as_dlpack
    dev = torch.device("cuda")
    pattern = _coords_pattern(2, 2, [(0, 1)], 16, torch.float16, dev)
    ro, ci, ri = pattern.index_sets()[:3]
    a, b = torch.randn(8, 32, dtype=torch.float16, device=dev).t(), torch.randn(8, 32, dtype=torch.float16, device=dev)
    out = torch.empty_like(pattern.values)
    need = _C.bsr_sdd_row_sums_bytes(32, 8, 32, 16, 1, False, 0, "float16")
    assert need > 0
    for nbytes in (0, need - 16):
        ws = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=dev)
        with pytest.raises(ValueError, match="row_sums_workspace"):
            _C.bsr_sdd(as_dlpack(a), as_dlpack(b), 32, 32, 16, as_dlpack(ri), as_dlpack(ci), as_dlpack(out),
                       False, torch.cuda.current_stream().cuda_stream, block_row_offsets=as_dlpack(ro),
                       a_row_sums=as_dlpack(torch.empty(32, dtype=torch.float16, device=dev)),
                       row_sums_workspace=ws.data_ptr() if nbytes else 0, row_sums_workspace_bytes=nbytes)
    torch.cuda.synchronize()  # no sticky error


@pytest.mark.cuda
def test_sdd_split_k_falls_back_when_the_workspace_cannot_be_allocated(monkeypatch):
    """The split-K partials' workspace running out of memory (simulated) leaves the sdd unsplit,
    with the same result."""
    calls = _simulate_oom(monkeypatch)
    test_sdd_split_k(128, torch.bfloat16, 2048)
    if _splits_by_default():
        assert calls  # the partials were wanted, and refused
    calls.clear()
    test_sdd_split_k_sm80(32, torch.bfloat16, 4096)  # the SM80 kernel's partials
    if _sm80_splits_by_default():
        assert calls


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("op_dtype", OP_DTYPES, ids=_dtype_id, indirect=True)
@pytest.mark.parametrize("transpose", [False, True], ids=["S", "St"])
def test_dsd(device, block, op_dtype, transpose):
    dtype = op_dtype
    rows, cols = 3 * block, 2 * block
    s = make_matrix(rows, cols, block, 0.5, dtype, device)
    op = s.t() if transpose else s
    ref_s = dense64(op)
    m, k = op.shape
    for n in (1, 7, 129):
        x = randn(k, n, dtype=dtype, device=device)
        out = op @ x
        assert out.shape == (m, n) and out.dtype == dtype
        assert rel_error(out, ref_s @ x.double()) <= tol(dtype, device)


@pytest.mark.parametrize("block", [32, 64, 128])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("pattern_kind", ["random", "lone", "pairs", "full"])
def test_sdd_tma_shapes(device, block, dtype, pattern_kind):
    """sdd at sizes the sm_90a kernels take (16-byte aligned strides, k a multiple of 64 and not),
    an odd number of block rows, and patterns of lone blocks, vertical pairs, random and full,
    against float64."""
    rb, cb = 5, 3
    g = torch.Generator().manual_seed(block)
    if pattern_kind == "random":
        mask = torch.rand(rb, cb, generator=g) < 0.5
    elif pattern_kind == "lone":  # never both rows of a pair in one column
        mask = torch.zeros(rb, cb, dtype=torch.bool)
        for r in range(rb):
            mask[r, (r // 2 + r % 2) % cb] = True
    elif pattern_kind == "pairs":
        mask = torch.zeros(rb, cb, dtype=torch.bool)
        mask[0:2, 1] = mask[2:4, 0] = mask[2:4, 2] = mask[4, 2] = True
    else:
        mask = torch.ones(rb, cb, dtype=torch.bool)
    pattern = make_matrix(rb * block, cb * block, block, 0.5, dtype, device, mask=mask)
    dense_mask = pattern.mask().repeat_interleave(block, 0).repeat_interleave(block, 1)
    for k in (64, 200, 520):
        a = randn(rb * block, k, dtype=dtype, device=device)
        b = randn(k, cb * block, dtype=dtype, device=device)
        out = bsr.sdd(a, b, pattern)
        ref = (a.double() @ b.double()) * dense_mask
        assert rel_error(out.to_dense(), ref) <= tol(dtype, device)


@pytest.mark.parametrize("block", [32, 64, 128])
@pytest.mark.parametrize("dtype", ["tf32", torch.float16, torch.bfloat16], ids=["tf32", "f16", "bf16"])
def test_sdd_grouped_rows(device, block, dtype):
    """Block rows of 9, 1, 0 and 5 blocks: the grouped SM80 sdd (16-bit b = 32 on CUDA: four blocks of
    one row side by side in a CTA, groups cut at aligned chunks of the coordinate list and at row
    ends) and the other sdd kernels, against float64, k a multiple of the k-slice and not."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        _sdd_grouped_rows(device, block, torch.float32 if dtype == "tf32" else dtype)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def _sdd_grouped_rows(device, block, dtype):
    mask = torch.zeros(4, 9, dtype=torch.bool)
    mask[0, :] = True
    mask[1, 4] = True
    mask[3, [0, 2, 5, 6, 8]] = True
    pattern = make_matrix(4 * block, 9 * block, block, 0.5, dtype, device, mask=mask)
    dense_mask = pattern.mask().repeat_interleave(block, 0).repeat_interleave(block, 1)
    for k in (45, 200):
        a = randn(4 * block, k, dtype=dtype, device=device)
        b = randn(k, 9 * block, dtype=dtype, device=device)
        out = bsr.sdd(a, b, pattern)
        ref = (a.double() @ b.double()) * dense_mask
        assert rel_error(out.to_dense(), ref) <= tol(dtype, device)


@pytest.mark.cuda
@pytest.mark.parametrize("group", ["0", "1"])
def test_sdd_group_each(group):
    """SPARSEKERN_BSR_SDD_GROUP=0 / 1 (read once per process; the dense sdd path off) runs the SM80
    sdd of 16-bit blocks of 32 one block per CTA or grouped (auto groups only from 8 blocks per SM,
    more than these tests' patterns hold): test_sdd_grouped_rows and test_sdd on CUDA in a fresh
    process; a malformed value raises a ValueError naming the variable."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    _cuda_tests_in_fresh_process(
        "sdd_grouped_rows or (test_sdd and not dense and not tma and not tf32_layouts and not each "
        "and not workspace)", SPARSEKERN_BSR_SDD_GROUP=group, SPARSEKERN_BSR_SDD_DENSE="0")
    if group == "1":
        _sdd_rejects_switch("SPARSEKERN_BSR_SDD_GROUP", "4", "torch.float16", 32, "a")


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("op_dtype", OP_DTYPES, ids=_dtype_id, indirect=True)
@pytest.mark.parametrize("transpose", [False, True], ids=["P", "Pt"])
def test_sdd(device, block, op_dtype, transpose):
    dtype = op_dtype
    rows, cols = 2 * block, 3 * block
    pattern = make_matrix(rows, cols, block, 0.5, dtype, device)
    pattern = pattern.t() if transpose else pattern
    mask = pattern.mask().repeat_interleave(block, 0).repeat_interleave(block, 1)
    m, n = pattern.shape
    for k in (1, 7, 129):
        a = randn(m, k, dtype=dtype, device=device)
        b = randn(k, n, dtype=dtype, device=device)
        out = bsr.sdd(a, b, pattern)
        assert isinstance(out, BlockSparseMatrix) and out.transposed == transpose
        assert out.values.shape == pattern.values.shape
        ref = (a.double() @ b.double()) * mask
        assert rel_error(out.to_dense(), ref) <= tol(dtype, device)


def test_tf32_setting(device):
    """fp32 is exact unless TF32 is allowed (then within the TF32 tolerance)."""
    s = make_matrix(128, 128, 64, 0.5, torch.float32, device)
    x = randn(65, 128, device=device)
    ref = x.double() @ dense64(s)
    prev = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        assert rel_error(bsr.dds(x, s), ref) <= tolerance(torch.float32)
        torch.backends.cuda.matmul.allow_tf32 = True
        assert rel_error(bsr.dds(x, s), ref) <= tolerance(torch.float32, tf32=True)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


@pytest.mark.parametrize("case", ["single", "dense", "empty_rows_cols", "no_blocks_in_op"])
def test_pattern_extremes(device, case):
    b = 32
    rb, cb = 4, 3
    if case == "single":
        mask = torch.zeros(rb, cb, dtype=torch.bool)
        mask[2, 1] = True
    elif case == "dense":
        mask = torch.ones(rb, cb, dtype=torch.bool)
    elif case == "empty_rows_cols":
        mask = torch.zeros(rb, cb, dtype=torch.bool)
        mask[0, 0] = mask[3, 0] = mask[3, 2] = True  # rows 1, 2 and column 1 empty
    else:
        mask = torch.zeros(rb, cb, dtype=torch.bool)
        mask[1, 2] = True
    for dtype in (torch.float32, torch.float16):
        s = make_matrix(rb * b, cb * b, b, 1.0, dtype, device, mask=mask)
        ref = dense64(s)
        x = randn(9, rb * b, dtype=dtype, device=device)
        assert rel_error(bsr.dds(x, s), x.double() @ ref) <= tol(dtype, device)
        y = randn(cb * b, 5, dtype=dtype, device=device)
        assert rel_error(s @ y, ref @ y.double()) <= tol(dtype, device)
        a, bb = randn(rb * b, 7, dtype=dtype, device=device), randn(7, cb * b, dtype=dtype, device=device)
        full = (a.double() @ bb.double()) * mask.to(device).repeat_interleave(b, 0).repeat_interleave(b, 1)
        assert rel_error(bsr.sdd(a, bb, s).to_dense(), full) <= tol(dtype, device)


def test_noncontiguous_and_strided_views(device):
    b = 16
    s = make_matrix(48, 80, b, 0.6, torch.float32, device)
    ref = dense64(s)
    big = randn(30, 200, device=device)
    x = big[::3, 7:55]                      # 10 × 48, unaligned and strided
    assert rel_error(bsr.dds(x, s), x.double() @ ref) <= tol(torch.float32, device)
    xt = randn(48, 10, device=device).t()   # transposed view
    assert rel_error(bsr.dds(xt, s), xt.double() @ ref) <= tol(torch.float32, device)
    x3 = randn(2, 3, 5, 48, device=device).transpose(1, 2)  # leading batch dims, non-contiguous
    out = bsr.dds(x3, s)
    assert out.shape == (2, 5, 3, 80)
    assert rel_error(out, x3.double() @ ref) <= tol(torch.float32, device)
    y = randn(80, 13, device=device)[:, ::1].t().contiguous().t()  # column-major
    assert rel_error(s @ y, ref @ y.double()) <= tol(torch.float32, device)
    y2 = randn(100, 80, device=device)[5:18].t()  # strided transposed
    assert rel_error(s @ y2, ref @ y2.double()) <= tol(torch.float32, device)
    a = randn(48, 31, device=device)[:, 1:]  # 48 × 30, unaligned rows
    bm = randn(30, 160, device=device)[:, ::2]
    mask = s.mask().to(device).repeat_interleave(b, 0).repeat_interleave(b, 1)
    assert rel_error(bsr.sdd(a, bm, s).to_dense(), (a.double() @ bm.double()) * mask) <= tol(torch.float32, device)


def test_empty_operands(device):
    s = make_matrix(64, 32, 32, 1.0, torch.float32, device)
    assert bsr.dds(randn(0, 64, device=device), s).shape == (0, 32)
    assert (s @ randn(32, 0, device=device)).shape == (64, 0)
    out = bsr.sdd(randn(64, 0, device=device), randn(0, 32, device=device), s)
    assert torch.equal(out.values, torch.zeros_like(out.values))
    # A sparse matrix with no rows: the product is the bias (or zeros), never garbage.
    z = BlockSparseMatrix(torch.zeros(0, 16, 16, device=device), torch.zeros(1, dtype=torch.int32, device=device),
                          torch.zeros(0, dtype=torch.int32, device=device), (0, 48))
    bias = randn(48, device=device)
    out = bsr.dds(randn(5, 0, device=device), z, bias)
    assert torch.equal(out, bias.expand(5, 48))


def test_poisoned_outputs_are_fully_written(device):
    """The native entry points write every element of caller buffers (NaN-filled here)."""
    b = 16
    s = make_matrix(64, 48, b, 0.5, torch.float16, device)
    x = randn(37, 64, dtype=torch.float16, device=device)
    out = torch.full((37, 48), float("nan"), dtype=torch.float16, device=device)
    def caps():  # DLPack capsules are single-use: fresh ones for every call
        return [bsr._idx(t) for t in s.index_sets()]

    ro, ci, ri, co, rbc, bbc = caps()
    _C.bsr_dds(bsr._idx(x), bsr._idx(s.values), 64, 48, b, ro, ci, co, rbc, bbc, False, None,
               bsr._idx(out), False, sparsekern._core.stream_of(x))
    assert rel_error(out, x.double() @ dense64(s)) <= tol(torch.float16, device)
    y = randn(48, 19, dtype=torch.float16, device=device).t().contiguous().t()
    out = torch.full((64, 19), float("nan"), dtype=torch.float16, device=device)
    ro, ci, ri, co, rbc, bbc = caps()
    _C.bsr_dsd(bsr._idx(s.values), 64, 48, b, ro, ci, co, rbc, bbc, False, bsr._idx(y),
               bsr._idx(out), False, sparsekern._core.stream_of(y))
    assert rel_error(out, dense64(s) @ y.double()) <= tol(torch.float16, device)
    a = randn(21, 64, dtype=torch.float16, device=device).t()  # 64 × 21, column-major
    bm = randn(21, 48, dtype=torch.float16, device=device)
    vals = torch.full_like(s.values, float("nan"))
    ro, ci, ri, co, rbc, bbc = caps()
    _C.bsr_sdd(bsr._idx(a), bsr._idx(bm), 64, 48, b, ri, ci, bsr._idx(vals), False,
               sparsekern._core.stream_of(a))
    mask = s.mask().to(device).repeat_interleave(b, 0).repeat_interleave(b, 1)
    assert rel_error(s.with_values(vals).to_dense(), (a.double() @ bm.double()) * mask) <= tol(torch.float16, device)


# ------------------------------------------------------------------------------------------------
# Gradients
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("transpose", [False, True])
def test_gradcheck_float64(transpose):
    torch.manual_seed(1)
    s = BlockSparseMatrix.random((32, 48), 16, 1 / 3, dtype=torch.float64)  # 2 of 6 blocks
    vals = s.values.clone().requires_grad_()
    op = s.with_values(vals)
    op = op.t() if transpose else op
    k, n = op.shape
    x = torch.randn(3, k, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(n, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, v, bb: bsr.dds(x, op.with_values(v), bb), (x, vals, bias))
    y = torch.randn(n, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v, y: bsr.dsd(op.with_values(v), y), (vals, y))
    a = torch.randn(k, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, n, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: bsr.sdd(a, b, op).values, (a, b))
    # Second order through the ops built from one another.
    if transpose:
        assert torch.autograd.gradgradcheck(lambda x, v: bsr.dds(x, op.with_values(v)), (x[:1], vals))


@pytest.mark.parametrize("op_dtype", OP_DTYPES, ids=_dtype_id, indirect=True)
def test_backward_against_reference(device, op_dtype):
    dtype = op_dtype
    for block, transpose in ((16, False), (64, True), (128, False)):
        s = make_matrix(2 * block, 2 * block, block, 0.5, dtype, device)
        vals = s.values.clone().requires_grad_()
        op = s.with_values(vals)
        op = op.t() if transpose else op
        x = randn(33, 2 * block, dtype=dtype, device=device).requires_grad_()
        bias = randn(2 * block, dtype=dtype, device=device).requires_grad_()
        out = bsr.dds(x, op, bias)
        g = randn(*out.shape, dtype=dtype, device=device)
        gx, gv, gb = torch.autograd.grad(out, (x, vals, bias), g)
        v64 = vals.detach().double().requires_grad_()
        x64 = x.detach().double().requires_grad_()
        b64 = bias.detach().double().requires_grad_()
        ref = x64 @ op.with_values(v64).to_dense() + b64
        rx, rv, rb = torch.autograd.grad(ref, (x64, v64, b64), g.double())
        t = 4 * tol(dtype, device)
        assert rel_error(gx, rx) <= t and rel_error(gv, rv) <= t and rel_error(gb, rb) <= t
        # dsd and sdd backward
        y = randn(2 * block, 17, dtype=dtype, device=device).requires_grad_()
        out = bsr.dsd(op.with_values(vals), y)
        g = randn(*out.shape, dtype=dtype, device=device)
        gv, gy = torch.autograd.grad(out, (vals, y), g)
        y64 = y.detach().double().requires_grad_()
        rv, ry = torch.autograd.grad(op.with_values(v64).to_dense() @ y64, (v64, y64), g.double())
        assert rel_error(gv, rv) <= t and rel_error(gy, ry) <= t
        a = randn(2 * block, 9, dtype=dtype, device=device).requires_grad_()
        bm = randn(9, 2 * block, dtype=dtype, device=device).requires_grad_()
        out = bsr.sdd(a, bm, op).values
        g = randn(*out.shape, dtype=dtype, device=device)
        ga, gbm = torch.autograd.grad(out, (a, bm), g)
        a64, bm64 = a.detach().double().requires_grad_(), bm.detach().double().requires_grad_()
        ra, rbm = torch.autograd.grad(bsr.sdd(a64, bm64, op.to(torch.float64)).values, (a64, bm64), g.double())
        assert rel_error(ga, ra) <= t and rel_error(gbm, rbm) <= t


def test_dds_double_backward_float64():
    """create_graph=True through the eager dds autograd path (it switches to the custom ops)."""
    s = make_matrix(64, 96, 32, 0.5, torch.float64, torch.device("cpu"))
    vals = s.values.clone().requires_grad_()
    x = randn(5, 64, dtype=torch.float64).requires_grad_()
    bias = randn(96, dtype=torch.float64).requires_grad_()

    def f(x, vals, bias):
        return bsr.dds(x, s.with_values(vals), bias)

    assert torch.autograd.gradgradcheck(f, (x, vals, bias))


def test_dds_eager_function_matches_custom_op(device):
    """The eager autograd.Function and the registered custom-op autograd give the same gradients."""
    s = make_matrix(64, 96, 32, 0.5, torch.float32, device)
    rows, cols = s._storage_shape
    index = s.index_sets()
    for transpose in (False, True):
        k = 96 if transpose else 64
        x = randn(7, k, dtype=torch.float32, device=device).requires_grad_()
        v = s.values.clone().requires_grad_()
        bias = randn(64 if transpose else 96, device=device).requires_grad_()
        out1 = bsr._DdsFunction.apply(x, v, tuple(index), rows, cols, transpose, bias)
        g = torch.randn_like(out1)
        grads1 = torch.autograd.grad(out1, (x, v, bias), g)
        out2 = bsr._dds_op(x, v, *index, rows, cols, transpose, bias)
        grads2 = torch.autograd.grad(out2, (x, v, bias), g)
        assert torch.equal(out1, out2)
        for a, b in zip(grads1, grads2):
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-5)


def test_custom_ops_opcheck():
    s = BlockSparseMatrix.random((32, 48), 16, 0.5, dtype=torch.float32)
    idx = s.index_sets()
    x = torch.randn(5, 32, requires_grad=True)
    v = s.values.clone().requires_grad_()
    bias = torch.randn(48, requires_grad=True)
    torch.library.opcheck(torch.ops.sparsekern.bsr_dds.default, (x, v, *idx, 32, 48, False, bias))
    y = torch.randn(48, 3, requires_grad=True)
    torch.library.opcheck(torch.ops.sparsekern.bsr_dsd.default, (v, *idx, 32, 48, False, y))
    a, b = torch.randn(32, 6, requires_grad=True), torch.randn(6, 48, requires_grad=True)
    torch.library.opcheck(torch.ops.sparsekern.bsr_sdd.default, (a, b, s.values, *idx, 32, 48))


def test_torch_compile_traces():
    layer = BlockSparseLinear(64, 32, density=0.5, block_size=16)
    x = torch.randn(4, 64)
    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), layer(x))


# ------------------------------------------------------------------------------------------------
# BlockSparseMatrix
# ------------------------------------------------------------------------------------------------
def test_matrix_constructors_and_views(device):
    b = 32
    dense = randn(128, 96, device=device)
    mask = torch.rand(4, 3) < 0.5
    mask[0, 0] = True
    m = BlockSparseMatrix.from_dense(dense, b, mask=mask)
    full_mask = mask.to(device).repeat_interleave(b, 0).repeat_interleave(b, 1)
    assert torch.equal(m.to_dense(), dense * full_mask)
    assert m.nnz_blocks == int(mask.sum()) and m.shape == (128, 96)
    # Density by block magnitude keeps the strongest blocks.
    dense2 = dense.clone()
    dense2[64:96, 32:64] *= 100
    top = BlockSparseMatrix.from_dense(dense2, b, density=1 / 12)
    assert top.nnz_blocks == 1 and top.mask()[2, 1]
    # .t() shares every tensor and transposes the logical matrix.
    t = m.t()
    assert t.shape == (96, 128) and t.values.data_ptr() == m.values.data_ptr()
    assert all(x.data_ptr() == y.data_ptr() for x, y in zip(t.index_sets(), m.index_sets()))
    assert torch.equal(t.to_dense(), m.to_dense().t())
    assert torch.equal(t.t().to_dense(), m.to_dense())
    # torch BSR round trip, both orientations.
    for mat in (m, t):
        tb = mat.to_torch_bsr()
        assert tb.layout == torch.sparse_bsr
        assert torch.equal(tb.to_dense(), mat.to_dense())
        back = BlockSparseMatrix.from_torch_bsr(tb)
        assert torch.equal(back.to_dense(), mat.to_dense())
    # Random: round(density · blocks) blocks, at least one.
    r = BlockSparseMatrix.random((256, 128), 64, 0.3, device=device)
    assert r.nnz_blocks == round(0.3 * 8) and r.device.type == device.type
    assert BlockSparseMatrix.random((64, 64), 64, 0.01).nnz_blocks == 1


def test_index_sets_consistent():
    m = BlockSparseMatrix.random((128, 192), 16, 0.3)
    ro, ci, ri, co, rbc, bbc = (t.long() for t in m.index_sets())
    for p in range(m.nnz_blocks):
        assert ro[ri[p]] <= p < ro[ri[p] + 1]
    for j in range(192 // 16):
        e = torch.arange(co[j], co[j + 1])
        assert torch.all(ci[bbc[e]] == j)
        assert torch.all(ri[bbc[e]] == rbc[e])
        assert torch.all(rbc[e][1:] > rbc[e][:-1])
    _C.bsr_validate(m.nnz_blocks, 128, 192, 16, *(bsr._idx(t) for t in m.index_sets()))


def test_state_dict_round_trip(device):
    m = BlockSparseMatrix.random((64, 128), 32, 0.5, device=device)
    buf = io.BytesIO()
    torch.save(m.t().state_dict(), buf)
    buf.seek(0)
    back = BlockSparseMatrix.from_state_dict(torch.load(buf))
    assert back.transposed and torch.equal(back.to_dense(), m.t().to_dense())


# ------------------------------------------------------------------------------------------------
# Bad input: clear exceptions naming the argument
# ------------------------------------------------------------------------------------------------
def test_bad_inputs():
    m = BlockSparseMatrix.random((64, 64), 32, 0.5)
    vals = m.values
    ro, ci = m.block_row_offsets, m.block_col_indices
    with pytest.raises(ValueError, match="block_size"):   # block size does not divide the shape
        BlockSparseMatrix.random((64, 48), 32, 0.5)
    with pytest.raises(ValueError, match="block_size"):
        BlockSparseMatrix(torch.zeros(2, 32, 32), ro, ci[:2], (64, 48))
    with pytest.raises(ValueError, match="block_size"):   # unsupported block size
        BlockSparseMatrix.random((64, 64), 8, 0.5)
    with pytest.raises(ValueError, match="density"):
        BlockSparseMatrix.random((64, 64), 32, 0.0)
    with pytest.raises(ValueError, match="density"):
        BlockSparseMatrix.random((64, 64), 32, 1.5)
    with pytest.raises(ValueError, match="density"):
        BlockSparseLinear(64, 64, density=-0.1, block_size=32)
    with pytest.raises(ValueError, match="in_features"):
        BlockSparseLinear(40, 64, block_size=32)
    bad = ci.clone()
    bad[0] = 5  # out of range (2 block columns)
    with pytest.raises(ValueError, match="block_col_indices"):
        BlockSparseMatrix(vals, ro, bad, (64, 64))
    full = BlockSparseMatrix.random((64, 64), 32, 1.0)
    unsorted = full.block_col_indices.clone()
    unsorted[0], unsorted[1] = unsorted[1].item(), unsorted[0].item()
    with pytest.raises(ValueError, match="block_col_indices"):
        BlockSparseMatrix(full.values, full.block_row_offsets, unsorted, (64, 64))
    bad_off = full.block_row_offsets.clone()
    bad_off[2] = 5  # last offset != nnz
    with pytest.raises(ValueError, match="block_row_offsets"):
        BlockSparseMatrix(full.values, bad_off, full.block_col_indices, (64, 64))
    with pytest.raises(ValueError, match="block_row_offsets"):
        BlockSparseMatrix(full.values, full.block_row_offsets[:2], full.block_col_indices, (64, 64))
    with pytest.raises(TypeError, match="block_col_indices"):
        BlockSparseMatrix(vals, ro, ci.float(), (64, 64))
    # Products: shapes, dtypes, wrong weight dtype.
    with pytest.raises(ValueError, match="`x`"):
        bsr.dds(torch.randn(3, 32), m)
    with pytest.raises(TypeError, match="`x`"):
        bsr.dds(torch.randn(3, 64, dtype=torch.float64), m)
    with pytest.raises(TypeError, match="`x`"):
        bsr.dds(torch.randn(3, 64).int(), m)
    with pytest.raises(TypeError, match="`s`"):
        bsr.dds(torch.randn(3, 64), torch.randn(64, 64))
    with pytest.raises(ValueError, match="`bias`"):
        bsr.dds(torch.randn(3, 64), m, torch.randn(7))
    with pytest.raises(TypeError, match="`bias`"):
        bsr.dds(torch.randn(3, 64), m, torch.randn(64, dtype=torch.float64))
    with pytest.raises(ValueError, match="`x`"):
        bsr.dsd(m, torch.randn(32, 3))
    with pytest.raises(ValueError, match="`a` · `b`"):
        bsr.sdd(torch.randn(64, 5), torch.randn(4, 64), m)
    with pytest.raises(TypeError, match="`b`"):
        bsr.sdd(torch.randn(64, 5), torch.randn(5, 64).half(), m)
    layer = BlockSparseLinear(64, 32, block_size=32)
    with pytest.raises(TypeError, match="`x`"):  # input dtype differs from the weight's
        layer(torch.randn(2, 64, dtype=torch.float64))
    with pytest.raises(ValueError, match="`values`"):
        m.with_values(torch.randn(5, 32, 32))
    # The native layer names arguments too (bypassing the Python checks).
    with pytest.raises(TypeError, match="`a`"):
        _C.bsr_dds(bsr._idx(torch.randn(3, 64, dtype=torch.float64)), bsr._idx(vals), 64, 64, 32,
                   *(bsr._idx(t) for t in (ro, ci, m.block_col_offsets, m.block_rows_by_col, m.blocks_by_col)),
                   False, None, bsr._idx(torch.empty(3, 64)), False, 0)
    with pytest.raises(ValueError, match="`a`"):
        _C.bsr_dds(bsr._idx(torch.randn(3, 48)), bsr._idx(vals), 64, 64, 32,
                   *(bsr._idx(t) for t in (ro, ci, m.block_col_offsets, m.block_rows_by_col, m.blocks_by_col)),
                   False, None, bsr._idx(torch.empty(3, 64)), False, 0)
    bad_cols = m.block_rows_by_col.clone()
    bad_cols[0] = 7
    with pytest.raises(ValueError, match="block_rows_by_col"):  # CPU calls check index contents
        _C.bsr_dds(bsr._idx(torch.randn(3, 64)), bsr._idx(vals), 64, 64, 32,
                   *(bsr._idx(t) for t in (ro, ci, m.block_col_offsets, bad_cols, m.blocks_by_col)),
                   False, None, bsr._idx(torch.empty(3, 64)), False, 0)


@pytest.mark.cuda
def test_mismatched_devices():
    m = BlockSparseMatrix.random((64, 64), 32, 0.5)
    with pytest.raises(ValueError, match="`x`"):
        bsr.dds(torch.randn(3, 64, device="cuda"), m)
    with pytest.raises(ValueError, match="`x`"):
        bsr.dsd(m.to("cuda"), torch.randn(64, 3))
    with pytest.raises(ValueError, match="`a`"):
        bsr.sdd(torch.randn(64, 5), torch.randn(5, 64), m.to("cuda"))
    with pytest.raises(ValueError, match="block_row_offsets"):
        BlockSparseMatrix(m.values.cuda(), m.block_row_offsets, m.block_col_indices.cuda(), (64, 64))


# ------------------------------------------------------------------------------------------------
# BlockSparseLinear
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_linear_matches_dense(device, dtype):
    layer = BlockSparseLinear(96, 64, bias=True, density=0.4, block_size=32, device=device, dtype=dtype)
    assert layer.in_features == 96 and layer.out_features == 64
    assert layer.weight.shape == (layer.nnz_blocks, 32, 32) and layer.bias.shape == (64,)
    assert "in_features=96, out_features=64, bias=True" in repr(layer)
    x = randn(2, 7, 96, dtype=dtype, device=device).requires_grad_()
    y = layer(x)
    w = layer.dense_weight().detach().double()
    ref = x.detach().double() @ w.t() + layer.bias.detach().double()
    assert y.shape == (2, 7, 64) and rel_error(y, ref) <= tol(dtype, device)
    g = randn(*y.shape, dtype=dtype, device=device)
    gx, gw, gb = torch.autograd.grad(y, (x, layer.weight, layer.bias), g)
    x64 = x.detach().double().requires_grad_()
    v64 = layer.weight.detach().double().requires_grad_()
    b64 = layer.bias.detach().double().requires_grad_()
    ref = x64 @ layer.weight_matrix.with_values(v64).to_dense().t() + b64
    rx, rv, rb = torch.autograd.grad(ref, (x64, v64, b64), g.double())
    t = 4 * tol(dtype, device)
    assert rel_error(gx, rx) <= t and rel_error(gw, rv) <= t and rel_error(gb, rb) <= t


def test_linear_gradcheck_and_no_bias():
    layer = BlockSparseLinear(32, 48, bias=False, density=0.5, block_size=16, dtype=torch.float64)
    assert layer.bias is None and "bias=False" in repr(layer)
    x = torch.randn(3, 32, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(layer, (x,))


def test_linear_from_dense_and_back(device):
    lin = torch.nn.Linear(128, 64, device=device)
    with torch.no_grad():
        lin.weight[32:64, 96:128] *= 50  # the strongest block must survive
    sp = BlockSparseLinear.from_dense(lin, density=0.25, block_size=32)
    assert sp.nnz_blocks == 2 and sp.weight_matrix.mask()[1, 3]
    assert torch.equal(sp.bias, lin.bias)
    mask = sp.weight_matrix.mask().repeat_interleave(32, 0).repeat_interleave(32, 1)
    assert torch.equal(sp.dense_weight(), lin.weight * mask)
    back = sp.to_dense_linear()
    x = randn(5, 128, device=device)
    assert rel_error(back(x), sp(x).double()) <= tol(torch.float32, device)


def test_linear_state_dict(device):
    a = BlockSparseLinear(64, 64, density=0.25, block_size=16, device=device)
    b = BlockSparseLinear(64, 64, density=0.25, block_size=16, device=device)
    derived = {name: getattr(b, name).data_ptr() for name in bsr._INDEX_NAMES[2:]}
    b.load_state_dict(a.state_dict())
    # Same number of blocks: the derived index sets are rewritten in place (a CUDA graph holding
    # them stays valid: test_linear_graph_survives_load_state_dict), and agree with a's.
    assert {name: getattr(b, name).data_ptr() for name in bsr._INDEX_NAMES[2:]} == derived
    for name in bsr._INDEX_NAMES:
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    x = randn(3, 64, device=device)
    assert torch.equal(a(x), b(x))
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    a(xa).square().sum().backward()
    b(xb).square().sum().backward()
    assert torch.equal(xa.grad, xb.grad) and torch.equal(a.weight.grad, b.weight.grad)
    assert set(a.state_dict()) == {"weight", "bias", "block_row_offsets", "block_col_indices"}
    # A checkpoint with another density (another nnz) loads too.
    c = BlockSparseLinear(64, 64, density=0.75, block_size=16, device=device)
    buf = io.BytesIO()
    torch.save(c.state_dict(), buf)
    buf.seek(0)
    a.load_state_dict(torch.load(buf))
    assert a.nnz_blocks == c.nnz_blocks and torch.equal(a(x), c(x))


@pytest.mark.cuda
def test_linear_graph_survives_load_state_dict():
    """A CUDA graph of the layer's forward and gradients, replayed after load_state_dict of a
    checkpoint with the same number of blocks (another pattern), computes with the loaded pattern and
    values: every index set is rewritten where the graph reads it."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    dev = torch.device("cuda")
    torch.manual_seed(5)
    layer = BlockSparseLinear(256, 192, density=0.25, block_size=32, device=dev, dtype=torch.float32)
    other = BlockSparseLinear(256, 192, density=0.25, block_size=32, device=dev, dtype=torch.float32)
    assert other.nnz_blocks == layer.nnz_blocks
    x = torch.randn(40, 256, device=dev, requires_grad=True)
    go = torch.randn(40, 192, device=dev)

    def step():
        y = layer(x)
        return (y, *torch.autograd.grad(y, (x, layer.weight, layer.bias), go))

    graph, outs = capture_graph(step)
    layer.load_state_dict(other.state_dict())
    junk = [torch.full((1 << 16,), 7, dtype=torch.int32, device=dev) for _ in range(16)]  # reuse freed memory
    graph.replay()
    torch.cuda.synchronize()
    y, gx, gw, gb = outs
    w = other.to_dense_linear().weight.detach().double()
    xd, god = x.detach().double(), go.double()
    t = tol(torch.float32, dev)
    assert rel_error(y, xd @ w.t() + other.bias.double()) <= t
    assert rel_error(gx, god @ w) <= t
    rows, cols = other.block_row_indices.long(), other.block_col_indices.long()
    grid = (god.t() @ xd).reshape(192 // 32, 32, 256 // 32, 32).permute(0, 2, 1, 3)
    assert rel_error(gw, grid[rows, cols]) <= t
    del junk


# ------------------------------------------------------------------------------------------------
# Pattern learning
# ------------------------------------------------------------------------------------------------
def test_prune_and_regrow_keeps_optimizer_state(device):
    layer = BlockSparseLinear(128, 128, density=0.25, block_size=16, device=device)
    opt = torch.optim.Adam(layer.parameters(), lr=1e-2)
    x = randn(32, 128, device=device)
    for _ in range(2):
        layer(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        layer.weight[3].mul_(1e-3)  # the weakest block
    before_mask = layer.weight_matrix.mask().clone()
    before_pos = (layer.block_row_indices.long() * 8 + layer.block_col_indices.long()).tolist()
    before = {p: (layer.weight[i].clone(), opt.state[layer.weight]["exp_avg"][i].clone(),
                  opt.state[layer.weight]["exp_avg_sq"][i].clone()) for i, p in enumerate(before_pos)}
    weakest = before_pos[3]
    nnz = layer.nnz_blocks
    report = layer.prune_and_regrow(0.25, optimizer=opt)
    k = round(0.25 * nnz)
    assert report == {"pruned": k, "grown": k, "density": layer.density}
    assert layer.nnz_blocks == nnz
    after_pos = (layer.block_row_indices.long() * 8 + layer.block_col_indices.long()).tolist()
    assert weakest not in after_pos and len(set(after_pos)) == nnz
    state = opt.state[layer.weight]
    new = 0
    for i, p in enumerate(after_pos):
        if p in before:
            w, m1, m2 = before[p]
            assert torch.equal(layer.weight[i], w)
            assert torch.equal(state["exp_avg"][i], m1) and torch.equal(state["exp_avg_sq"][i], m2)
        else:
            new += 1
            assert not before_mask.flatten()[p]  # grown where there was no block
            assert torch.count_nonzero(layer.weight[i]) == 0
            assert torch.count_nonzero(state["exp_avg"][i]) == 0
    assert new == k
    cpu_sets = [t.cpu() for t in layer.weight_matrix.index_sets()]  # alive through the call
    _C.bsr_validate(nnz, 128, 128, 16, *(bsr._idx(t) for t in cpu_sets))
    # Training continues on the new pattern, forward matches the dense reference.
    layer(x).square().mean().backward()
    opt.step()
    ref = x.double() @ layer.dense_weight().detach().double().t() + layer.bias.detach().double()
    assert rel_error(layer(x), ref) <= tol(torch.float32, device)


def test_prune_and_regrow_with_scores_and_full_layer():
    m = BlockSparseMatrix.random((64, 64), 16, 0.5)
    scores = torch.zeros(4, 4)
    free = (~m.mask()).nonzero()[0]
    scores[free[0], free[1]] = 10.0
    bsr.prune_and_regrow(m, 1 / 8, grow_scores=scores)
    assert m.mask()[free[0], free[1]]
    full = BlockSparseLinear(32, 32, density=1.0, block_size=16)
    assert full.prune_and_regrow(0.5) == {"pruned": 0, "grown": 0, "density": 1.0}
    with pytest.raises(ValueError, match="fraction"):
        bsr.prune_and_regrow(m, 2.0)


# ------------------------------------------------------------------------------------------------
# Model patcher on a small RobertaModel (random weights, no downloads)
# ------------------------------------------------------------------------------------------------
def test_patcher_roberta(device):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.RobertaConfig(vocab_size=120, hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=128,
                                     max_position_embeddings=40, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = transformers.RobertaModel(cfg).to(device)
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    mp = BlockSparseModelPatcher()
    mp.add_pattern(r"encoder\.layer\.[0-9]+\.intermediate\.dense", {"density": 0.5, "block_size": 32})
    mp.add_pattern(r"encoder\.layer\.[0-9]+\.output\.dense", {"density": 0.5, "block_size": 32})
    mp.add_pattern(r"encoder\.layer\.[0-9]+\.attention\.output\.dense", {"density": 0.5, "block_size": 32})
    report = mp.patch_model(model)
    names = sorted(p["name"] for p in report["patched"])
    expected = sorted(n for n in linears if n.endswith(("intermediate.dense", "layer.0.output.dense",
                                                        "layer.1.output.dense", "attention.output.dense")))
    assert names == expected and len(names) == 6
    saved = 0
    for n in names:
        out_f, in_f = linears[n].weight.shape
        blocks = (out_f // 32) * (in_f // 32)
        saved += out_f * in_f - round(0.5 * blocks) * 32 * 32
        assert isinstance(model.get_submodule(n), BlockSparseLinear)
    assert report["parameters_before"] - report["parameters_after"] == saved
    assert report["parameters_after"] == sum(p.numel() for p in model.parameters())
    text = io.StringIO()
    mp.print_report(file=text)
    assert "patched 6 layers" in text.getvalue()

    # Toy task: make the first token's output match a fixed target; a few Adam steps reduce the loss.
    ids = torch.randint(3, 120, (4, 8), device=device)
    target = torch.randn(4, 64, device=device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(6):
        out = model(input_ids=ids).last_hidden_state[:, 0]
        loss = torch.nn.functional.mse_loss(out, target)
        opt.zero_grad()
        loss.backward()
        assert all(model.get_submodule(n).weight.grad is not None for n in names)
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    # Pattern learning on the whole model keeps it training.
    reports = sparsekern.nn.prune_and_regrow_model(model, 0.25, optimizer=opt)
    assert len(reports) == 6
    out = model(input_ids=ids).last_hidden_state[:, 0]
    torch.nn.functional.mse_loss(out, target).backward()
    opt.step()
    # Mixed precision (torch.autocast with the fp32 parameters, bf16 activations between the
    # patched layers and the autocast nn.Linear ones): the model keeps training.
    amp = []
    for _ in range(4):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            out = model(input_ids=ids).last_hidden_state[:, 0]
        loss = torch.nn.functional.mse_loss(out.float(), target)
        opt.zero_grad()
        loss.backward()
        assert all(model.get_submodule(n).weight.grad.dtype == torch.float32 for n in names)
        opt.step()
        amp.append(loss.item())
    assert amp[-1] < amp[0]


def test_patcher_bad_patterns():
    mp = BlockSparseModelPatcher()
    with pytest.raises(ValueError, match="density"):
        mp.add_pattern("x", {"density": 0})
    with pytest.raises(ValueError, match="block_size"):
        mp.add_pattern("x", {"density": 0.5, "block_size": 24})
    with pytest.raises(ValueError, match="patch_info"):
        mp.add_pattern("x", {"density": 0.5, "blocks": 32})
    with pytest.raises(ValueError, match="pattern"):
        mp.add_pattern("(", {"density": 0.5})
    model = torch.nn.Sequential(torch.nn.Linear(48, 64))
    mp.add_pattern("0", {"density": 0.5, "block_size": 32})
    with pytest.raises(ValueError, match="block_size"):
        mp.patch_model(model)


# ------------------------------------------------------------------------------------------------
# Host fast paths (issue 3): BlockSparseLinear reads its tensors from the module's dicts per call,
# the checks have a fast test in front of the full ones, dds passes only the index set it reads
# ------------------------------------------------------------------------------------------------
def _linear_ref(layer, x):
    w = layer.dense_weight().detach().double()
    y = x.detach().double() @ w.t()
    return y + layer.bias.detach().double() if layer.bias is not None else y


def test_linear_fast_path_follows_the_module(device):
    layer = BlockSparseLinear(96, 64, density=0.4, block_size=32, device=device)
    x = randn(5, 96, device=device)
    assert rel_error(layer(x), _linear_ref(layer, x)) <= tol(torch.float32, device)
    # .double() / .half() / .to(): new parameter and buffer tensors, seen by the next call.
    layer.double()
    y = layer(x.double())
    assert y.dtype == torch.float64 and rel_error(y, _linear_ref(layer, x)) <= tol(torch.float64, device)
    layer.half()
    y = layer(x.half())
    assert y.dtype == torch.float16 and rel_error(y, _linear_ref(layer, x)) <= tol(torch.float16, device)
    layer.float()
    if device.type == "cuda":  # away and back: the index buffers move with the module
        layer.cpu()
        assert rel_error(layer(x.cpu()), _linear_ref(layer, x.cpu())) <= tol(torch.float32, torch.device("cpu"))
        layer.to(device)
    assert layer.block_row_offsets.device.type == device.type
    assert rel_error(layer(x), _linear_ref(layer, x)) <= tol(torch.float32, device)
    # A checkpoint with another nnz: new weight and index tensors. `held` keeps a graph of the old
    # weight alive across the load (autograd then still caches that weight's gradient accumulator):
    # the backward through the new pattern must not see the old shape.
    held = layer(x)
    other = BlockSparseLinear(96, 64, density=0.75, block_size=32, device=device)
    layer.load_state_dict(other.state_dict())
    assert layer.nnz_blocks == other.nnz_blocks and torch.equal(layer(x), other(x))
    gw_new, = torch.autograd.grad(layer(x).sum(), (layer.weight,))
    assert gw_new.shape == layer.weight.shape
    del held
    # prune_and_regrow rewrites the index tensors in place.
    with torch.no_grad():
        layer.weight.add_(randn(*layer.weight.shape, device=device))
    before = layer.weight_matrix.mask().clone()
    assert layer.prune_and_regrow(0.3)["pruned"] > 0 and not torch.equal(layer.weight_matrix.mask(), before)
    assert rel_error(layer(x), _linear_ref(layer, x)) <= tol(torch.float32, device)
    # A buffer replaced by assignment, and the gradient path.
    layer.block_col_indices = layer.block_col_indices.clone()
    xg = x.clone().requires_grad_()
    y = layer(xg)
    assert rel_error(y, _linear_ref(layer, x)) <= tol(torch.float32, device)
    gx, gw = torch.autograd.grad(y.sum(), (xg, layer.weight))
    x64 = x.double().requires_grad_()
    v64 = layer.weight.detach().double().requires_grad_()
    ref = x64 @ layer.weight_matrix.with_values(v64).to_dense().t() + layer.bias.detach().double()
    rx, rv = torch.autograd.grad(ref.sum(), (x64, v64))
    assert rel_error(gx, rx) <= 4 * tol(torch.float32, device) and rel_error(gw, rv) <= 4 * tol(torch.float32, device)


def test_linear_takes_the_fast_path(device, monkeypatch):
    """The plain module call goes past the matrix view and the full checks (a regression here costs
    host time, not correctness)."""
    layer = BlockSparseLinear(64, 32, density=0.5, block_size=16, device=device)
    x = randn(2, 3, 64, device=device)
    ref = _linear_ref(layer, x)

    def slow(*args, **kwargs):
        raise AssertionError("slow path taken")

    monkeypatch.setattr(bsr, "dds", slow)
    monkeypatch.setattr(bsr, "_check_dds_args_full", slow)
    monkeypatch.setattr(type(layer), "weight_matrix", property(slow))
    with torch.no_grad():
        assert rel_error(layer(x), ref) <= tol(torch.float32, device)
    y = layer(x)
    assert y.requires_grad and rel_error(y, ref) <= tol(torch.float32, device)


def test_linear_parametrized_weight():
    """torch.nn.utils.parametrize (a subclass with a `weight` property) and the old weight_norm (a
    plain attribute in place of the parameter) both go through the attribute path; functional_call
    through the dicts."""
    parametrize = torch.nn.utils.parametrize

    class Double(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    layer = BlockSparseLinear(64, 32, density=0.5, block_size=16, dtype=torch.float64)
    x = torch.randn(3, 64, dtype=torch.float64)
    y0 = layer(x)
    parametrize.register_parametrization(layer, "weight", Double())
    torch.testing.assert_close(layer(x) - layer.bias, 2 * (y0 - layer.bias))
    plain = BlockSparseLinear(64, 32, density=0.5, block_size=16, dtype=torch.float64)
    y0 = plain(x)
    with warnings.catch_warnings():  # deprecated in favour of parametrizations
        warnings.simplefilter("ignore")
        torch.nn.utils.weight_norm(plain, "weight", dim=0)
    assert "weight" not in plain._parameters
    torch.testing.assert_close(plain(x), y0)
    with torch.no_grad():
        plain.weight_g.mul_(3)
    torch.testing.assert_close(plain(x) - plain.bias, 3 * (y0 - plain.bias))
    # torch.func.functional_call swaps the tensors in the module's dicts for the call.
    layer = BlockSparseLinear(64, 32, density=0.5, block_size=16, dtype=torch.float64)
    y0 = layer(x)
    swapped = {"weight": 2 * layer.weight.detach(), "bias": torch.zeros(32, dtype=torch.float64)}
    swapped.update({n: getattr(layer, n).clone() for n in bsr._INDEX_NAMES})
    torch.testing.assert_close(torch.func.functional_call(layer, swapped, (x,)), 2 * (y0 - layer.bias))
    torch.testing.assert_close(layer(x), y0)


def test_linear_bad_index_buffers(device):
    """A bad index tensor in the module is refused with the message of the full checks, for the
    sets the forward reads and for those it does not (the backward's)."""
    layer = BlockSparseLinear(64, 32, density=0.5, block_size=16, device=device)
    x = randn(3, 64, device=device)
    good = {n: getattr(layer, n) for n in bsr._INDEX_NAMES}
    cases = [(n, good[n].float(), TypeError, "int32 or int64") for n in bsr._INDEX_NAMES]
    cases += [(n, good[n].view(-1, 1), ValueError, "1-D") for n in bsr._INDEX_NAMES]
    # int64 passes the Python checks; the binding refuses any int64 set, read by the op or not.
    cases += [(n, good[n].long(), TypeError, "int32 tensor") for n in ("block_row_offsets", "block_rows_by_col")]
    if device.type == "cuda":
        cases += [(n, good[n].cpu(), ValueError, "device") for n in bsr._INDEX_NAMES]
    for name, bad, exc, phrase in cases:
        setattr(layer, name, bad)
        for grad in (False, True):
            with torch.set_grad_enabled(grad), pytest.raises(exc, match=f"`{name}`.*{phrase}"):
                layer(x)
        with pytest.raises(exc, match=f"`{name}`"):
            bsr.dds(x, layer.weight_matrix.t(), layer.bias)
        setattr(layer, name, good[name])
    assert rel_error(layer(x), _linear_ref(layer, x)) <= tol(torch.float32, device)


def test_dds_fast_checks_accept_what_the_full_checks_accept(device):
    """_dds_args_ok accepts only what _check_dds_args_full accepts, with the same (m, n)."""
    s = make_matrix(64, 96, 32, 0.5, torch.float32, device)
    idx = s.index_sets()
    x, xt, bias = randn(5, 64, device=device), randn(5, 96, device=device), randn(96, device=device)
    ok = [(x, s.values, idx, 64, 96, False, bias), (x, s.values, idx, 64, 96, False, None),
          (xt, s.values, idx, 64, 96, True, bias[:64].contiguous()), (x[:0], s.values, idx, 64, 96, False, bias),
          (randn(5, 128, device=device)[:, ::2], s.values, idx, 64, 96, False, bias)]
    bad = [(x.double(), s.values, idx, 64, 96, False, bias), (x, s.values, idx, 64, 96, True, bias),
           (x, s.values, idx, 64, 96, False, bias.double()), (x, s.values, idx, 64, 96, False, bias[:5]),
           (x, s.values, idx, 64, 96, False, bias.view(1, -1)), (x, s.values, idx, 64, 96, False, [1.0]),
           (x, s.values, idx[:5], 64, 96, False, None), (x, s.values, list(idx), 64, 96, False, None),
           (x, s.values, idx, 64, 80, False, None), (x, s.values, idx, 64, 96 * 2, False, None),
           (x[0], s.values, idx, 64, 96, False, None), (x.int(), s.values, idx, 64, 96, False, None),
           (x, s.values.reshape(-1, 32), idx, 64, 96, False, None), ("x", s.values, idx, 64, 96, False, None),
           (x, s.values, (idx[0].long(),) + idx[1:], 64, 96, False, None),
           (x, s.values, idx[:3] + (idx[3].float(),) + idx[4:], 64, 96, False, None),
           (x, s.values, idx[:5] + (idx[5][None],), 64, 96, False, None),
           (x, s.values, idx[:2] + (None,) + idx[3:], 64, 96, False, None),
           (x, s.values, idx, 64, 96, True, None), (x, torch.zeros(2, 8, 8), idx, 64, 96, False, None),
           (x, s.values[:, :16, :16], idx, 64, 96, False, None), (x, s.values, idx, 64, -96, False, None),
           (x, s.values[:, :, :16], idx, 64, 96, False, None), (x[:, :48], s.values, idx, 48, 96, False, None),
           (x.int(), s.values.int(), idx, 64, 96, False, None),
           # another device on the CPU machine: meta
           (x.to("meta"), s.values, idx, 64, 96, False, bias), (x, s.values, idx, 64, 96, False, bias.to("meta")),
           (x, s.values, idx[:1] + (idx[1].to("meta"),) + idx[2:], 64, 96, False, None),
           (x.to("meta"), s.values.to("meta"), tuple(t.to("meta") for t in idx), 64, 96, False, None)]
    if device.type == "cuda":
        bad += [(x.cpu(), s.values, idx, 64, 96, False, bias), (x, s.values, idx, 64, 96, False, bias.cpu()),
                (x, s.values, idx[:4] + (idx[4].cpu(),) + idx[5:], 64, 96, False, None)]
    for args in ok:
        assert bsr._dds_args_ok(*args) is not None
    for args in ok + bad:
        fast = bsr._dds_args_ok(*args)
        try:
            full = bsr._check_dds_args_full(*args)
        except (TypeError, ValueError) as e:  # refused by the fast test, with the full checks' error
            assert fast is None
            with pytest.raises(type(e), match=re.escape(str(e))):
                bsr._check_dds_args(*args)
        else:  # the same (m, n) either way (the binding checks index lengths against rows/cols)
            assert fast in (None, full) and bsr._check_dds_args(*args) == full
    assert bsr._dds_args_ok(x, s.values, (idx[0].long(),) + idx[1:], 64, 96, False, None) is None
    assert bsr._dds_args_ok(x, s.values, list(idx), 64, 96, False, None) is None
    # int64 index sets (accepted above) are refused by the binding, which then sees every set.
    for transpose, a in ((False, x), (True, xt)):
        with pytest.raises(TypeError, match="`block_row_offsets` must be an int32"):
            bsr._dds_impl(a, s.values, tuple(t.long() for t in idx), 64, 96, transpose, None)


@pytest.mark.parametrize("transpose", [False, True])
def test_dds_binding_reads_only_its_index_set(device, transpose):
    """The binding with None for the index sets an op does not read computes the same product;
    a set it reads is still required, and (CPU) its contents are checked."""
    s = make_matrix(64, 96, 32, 0.5, torch.float32, device)
    ro, ci, _, co, rbc, bbc = s.index_sets()
    k, n = (96, 64) if transpose else (64, 96)
    x = randn(7, k, device=device)

    def run(sets):
        out = torch.full((7, n), float("nan"), device=device)
        _C.bsr_dds(bsr._idx(x), bsr._idx(s.values), 64, 96, 32, *(bsr._idx(t) for t in sets), transpose,
                   None, bsr._idx(out), False, sparsekern._core.stream_of(x))
        return out

    full = run((ro, ci, co, rbc, bbc))
    ref = x.double() @ (dense64(s).t() if transpose else dense64(s))
    assert rel_error(full, ref) <= tol(torch.float32, device)
    read = (ro, ci, None, None, None) if transpose else (None, ci, co, rbc, bbc)
    assert torch.equal(run(read), full)
    assert torch.equal(bsr._dds_impl(x, s.values, s.index_sets(), 64, 96, transpose, None), full)
    missing = (None, ci, co, rbc, bbc) if transpose else (ro, ci, None, rbc, bbc)
    needed = "block_row_offsets" if transpose else "block_col_offsets"
    with pytest.raises(ValueError, match=f"`{needed}` is required"):
        run(missing)
    if device.type == "cpu":
        if transpose:
            bad = ci.clone()
            bad[0] = 9
            sets, name = (ro, bad, None, None, None), "block_col_indices"
        else:
            bad = rbc.clone()
            bad[0] = 9
            sets, name = (None, ci, co, bad, bbc), "block_rows_by_col"
        with pytest.raises(ValueError, match=name):
            run(sets)


@pytest.mark.cuda
def test_compile_reduce_overhead():
    """BlockSparseLinear under torch.compile(mode="reduce-overhead"): inductor around the custom ops
    and its CUDA-graph trees replaying them (tile counter memset and workspaces inside the captured
    region); forward and the three gradients against the eager layer, three calls on new inputs."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    dev = torch.device("cuda")
    torch.manual_seed(3)
    layer = BlockSparseLinear(1024, 2048, density=0.25, block_size=64, device=dev, dtype=torch.bfloat16)
    compiled = torch.compile(layer, mode="reduce-overhead")
    for _ in range(3):
        x = torch.randn(4096, 1024, device=dev, dtype=torch.bfloat16, requires_grad=True)
        go = torch.randn(4096, 2048, device=dev, dtype=torch.bfloat16)
        params = [x, layer.weight, layer.bias]
        y = compiled(x)
        got = torch.autograd.grad(y, params, go)
        y = y.clone()  # the tree's output buffers are reused by the next replay
        y_e = layer(x)
        want = torch.autograd.grad(y_e, params, go)
        assert rel_error(y, y_e) <= 1e-2
        for a, w in zip(got, want):
            assert rel_error(a, w) <= 1e-2
