"""Block-sparse edge cases found by an audit in session 29 (each failed before its fix): index
sets of int64 beyond int32, pattern learning with infinite or NaN scores and on a transposed view,
partial or foreign checkpoints, the model patcher's all-or-nothing swap, shared layers and frozen
ones, devices taken from torch's default, NumPy scalars as arguments. CPU only: none of these is
about a kernel."""
from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch
from torch import nn

import sparsekern
from sparsekern import BlockSparseLinear, BlockSparseMatrix, BlockSparseModelPatcher, bsr


def test_int64_indices_beyond_int32_are_refused():
    """2**32 + 1 was cast to 1 and accepted: a different pattern than the one given."""
    vals = torch.randn(2, 16, 16)
    with pytest.raises(ValueError, match="`block_col_indices` holds 4294967297, out of range"):
        BlockSparseMatrix(vals, torch.tensor([0, 1, 2]), torch.tensor([2 ** 32 + 1, 0]), (32, 32))
    with pytest.raises(ValueError, match="`block_row_offsets` holds -4294967296, out of range"):
        BlockSparseMatrix(vals, torch.tensor([-2 ** 32, 1, 2]), torch.tensor([1, 0]), (32, 32))
    ok = BlockSparseMatrix(vals, torch.tensor([0, 1, 2]), torch.tensor([1, 0]), (32, 32))
    assert ok.block_col_indices.tolist() == [1, 0]


def test_checkpoint_with_int64_indices_beyond_int32_is_refused():
    torch.manual_seed(0)
    layer = BlockSparseLinear(64, 64, density=0.5, block_size=16)
    sd = layer.state_dict()
    sd["block_col_indices"] = sd["block_col_indices"].long() + 2 ** 32
    fresh = BlockSparseLinear(64, 64, density=0.5, block_size=16)
    before = fresh.block_col_indices.clone()
    with pytest.raises(ValueError, match="out of range"):
        fresh.load_state_dict(sd)
    assert torch.equal(fresh.block_col_indices, before)


def _two_block_matrix():
    """32 × 32 with blocks (0, 0) (larger) and (1, 1) (smaller) of 16."""
    dense = torch.zeros(32, 32)
    dense[:16, :16] = 2.0
    dense[16:, 16:] = 1.0
    return BlockSparseMatrix.from_mask(torch.tensor([[True, False], [False, True]]), 16, dense)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_regrow_never_grows_onto_a_block_whatever_the_scores(bad):
    """An infinite or NaN score at an occupied position (an overflowed fp16 gradient norm) grew a
    second copy of block (0, 0): a duplicate index that the next product refused."""
    m = _two_block_matrix()
    scores = torch.zeros(2, 2)
    scores[0, 0] = bad
    scores[0, 1] = 0.5
    rep = bsr.prune_and_regrow(m, 0.5, grow_scores=scores)
    assert rep == {"pruned": 1, "grown": 1, "density": 0.5}
    pairs = sorted(zip(m.block_row_indices.tolist(), m.block_col_indices.tolist()))
    assert pairs == [(0, 0), (0, 1)]  # (1, 1) pruned (the smaller), (0, 1) grown (best free score)
    x = torch.randn(3, 32, dtype=torch.float64)
    ref = x @ m.to_dense().double()
    assert torch.allclose(bsr.dds(x.float(), m).double(), ref, atol=1e-5)


def test_regrow_with_nan_scores_ranks_them_last():
    m = _two_block_matrix()
    scores = torch.tensor([[0.0, math.nan], [0.1, 0.0]])
    bsr.prune_and_regrow(m, 0.5, grow_scores=scores)
    assert sorted(zip(m.block_row_indices.tolist(), m.block_col_indices.tolist())) == [(0, 0), (1, 0)]


def test_regrow_scores_follow_a_transposed_view():
    """On m.t() the scores are read in the view's orientation (they were read as the stored matrix's,
    so a score at (0, 1) of the view grew the block at (0, 1) of the storage)."""
    mask = torch.tensor([[True, False, False, False], [False, False, False, False]])  # 2 × 4 blocks
    dense = torch.zeros(32, 64)
    dense[:16, :16] = 1.0
    m = BlockSparseMatrix.from_mask(mask, 16, dense)
    view = m.t()  # 64 × 32: 4 × 2 blocks
    assert view.shape == (64, 32)
    scores = torch.zeros(4, 2)
    scores[2, 1] = 1.0  # the view's block (2, 1) = the storage's (1, 2)
    with pytest.raises(ValueError, match=r"`grow_scores` must be \(4, 2\)"):
        bsr.prune_and_regrow(view, 1.0, grow_scores=scores.t())
    bsr.prune_and_regrow(view, 1.0, grow_scores=scores)
    assert view.mask().nonzero().tolist() == [[2, 1]]
    assert m.mask().nonzero().tolist() == [[1, 2]]


@pytest.mark.parametrize("missing", ["block_row_offsets", "block_col_indices"])
@pytest.mark.parametrize("same_nnz", [True, False])
def test_checkpoint_with_half_a_pattern_is_refused_and_leaves_the_layer_whole(missing, same_nnz):
    """strict=False with one index key missing loaded the other one beside the layer's own (a wrong
    pattern, silently, or a layer that failed at its next forward)."""
    torch.manual_seed(1)
    src = BlockSparseLinear(64, 64, density=0.5 if same_nnz else 0.25, block_size=16)
    dst = BlockSparseLinear(64, 64, density=0.5, block_size=16)
    sd = src.state_dict()
    del sd[missing]
    x = torch.randn(5, 64)
    before = dst(x)
    with pytest.raises(RuntimeError, match="a block pattern needs both"):
        dst.load_state_dict(sd, strict=False)
    assert torch.equal(dst(x), before)


def test_checkpoint_pattern_without_weight_needs_the_same_block_count():
    torch.manual_seed(2)
    src = BlockSparseLinear(64, 64, density=0.25, block_size=16)
    dst = BlockSparseLinear(64, 64, density=0.5, block_size=16)
    sd = src.state_dict()
    del sd["weight"]
    with pytest.raises(RuntimeError, match="no weight for them"):
        dst.load_state_dict(sd, strict=False)


def test_checkpoint_of_a_layer_of_another_size_is_refused():
    """A 64 -> 32 layer's pattern fits a 128 -> 32 layer, and loaded "All keys matched"; nn.Linear
    reports a size mismatch. The layer's size now travels in the state_dict's metadata."""
    torch.manual_seed(3)
    small = BlockSparseLinear(64, 32, density=0.25, block_size=16)
    big = BlockSparseLinear(128, 32, density=0.5, block_size=16)
    with pytest.raises(RuntimeError, match="the checkpoint is a 64 -> 32 BlockSparseLinear"):
        big.load_state_dict(small.state_dict())
    buf = io.BytesIO()
    torch.save(small.state_dict(), buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="size mismatch"):
        big.load_state_dict(torch.load(buf))
    # Another density of the same layer still loads (the point of storing the pattern).
    other = BlockSparseLinear(64, 32, density=0.75, block_size=16)
    other.load_state_dict(small.state_dict())
    x = torch.randn(3, 64)
    assert torch.equal(other(x), small(x))
    # Inside a model: the metadata is per module.
    model_a, model_b = nn.Sequential(small), nn.Sequential(BlockSparseLinear(128, 32, block_size=16))
    with pytest.raises(RuntimeError, match="size mismatch for 0."):
        model_b.load_state_dict(model_a.state_dict())


def test_patcher_is_all_or_nothing_and_names_the_layer():
    """The first layer was swapped before the second one's block size failed."""
    model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 48))
    mp = BlockSparseModelPatcher()
    mp.add_pattern(".*", {"density": 0.5, "block_size": 32})
    with pytest.raises(ValueError, match="cannot patch '1' \\(64 -> 48\\).*left unchanged"):
        mp.patch_model(model)
    assert all(type(m) is nn.Linear for m in model)


def test_patcher_keeps_frozen_layers_frozen_and_the_training_mode():
    model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64))
    model[0].requires_grad_(False)
    model[1].eval()
    mp = BlockSparseModelPatcher()
    mp.add_pattern(".*", {"density": 0.5, "block_size": 32})
    mp.patch_model(model)
    assert not model[0].weight.requires_grad and not model[0].bias.requires_grad
    assert model[1].weight.requires_grad and model[1].bias.requires_grad
    assert model[0].training and not model[1].training


def test_patcher_replaces_a_shared_layer_under_every_name():
    """m.a = m.b = lin: only m.a was swapped, m.b kept the dense layer, and the report showed the
    parameter count growing (4160 -> 6272)."""
    lin = nn.Linear(64, 64)
    model = nn.Module()
    model.a = lin
    model.b = lin
    mp = BlockSparseModelPatcher()
    mp.add_pattern("^b$", {"density": 0.5, "block_size": 32})
    rep = mp.patch_model(model)
    assert isinstance(model.a, BlockSparseLinear) and model.a is model.b
    assert rep["parameters_before"] == 64 * 64 + 64
    assert rep["parameters_after"] == 2 * 32 * 32 + 64
    assert rep["patched"][0]["names"] == ["a", "b"]


def test_patcher_refuses_a_model_that_is_a_linear():
    with pytest.raises(ValueError, match="itself an nn.Linear"):
        mp = BlockSparseModelPatcher()
        mp.add_pattern(".*", {"density": 0.5})
        mp.patch_model(nn.Linear(64, 64))


def test_layer_follows_the_default_device_and_refuses_meta():
    """Under `with torch.device(...)` the weight followed the default device and the index buffers
    stayed on the CPU; on the meta device the layer failed inside torch (bincount)."""
    with pytest.raises(ValueError, match="meta device"):
        BlockSparseLinear(64, 32, device="meta")
    with torch.device("meta"):
        with pytest.raises(ValueError, match="meta device"):
            BlockSparseLinear(64, 32)
    g = torch.Generator().manual_seed(0)
    with torch.device("cpu"):
        layer = BlockSparseLinear(64, 32, generator=g)
    devices = {t.device for t in list(layer.parameters()) + list(layer.buffers())}
    assert devices == {torch.device("cpu")}


def test_numpy_scalars_and_from_mask_dtype():
    layer = BlockSparseLinear(np.int64(64), np.int64(32), density=np.float32(0.5), block_size=np.int64(16))
    assert layer.block_size == 16 and isinstance(layer.block_size, int) and layer.in_features == 64
    assert bsr.check_density(np.float64(0.25)) == 0.25
    dense = torch.randn(32, 32)
    m = BlockSparseMatrix.from_mask(torch.ones(2, 2, dtype=torch.bool), 16, dense, dtype=torch.float64)
    assert m.dtype == torch.float64 and torch.equal(m.to_dense(), dense.double())


def test_constructor_messages():
    with pytest.raises(ValueError, match=r"`shape` must be \(rows, cols\)"):
        BlockSparseMatrix.random((64,), 16, 0.3)
    t = torch.randn(2, 32, 32).to_sparse_bsr((16, 16))
    with pytest.raises(ValueError, match="2-D BSR matrix; got a 3-D"):
        BlockSparseMatrix.from_torch_bsr(t)
    assert sparsekern.BlockSparseMatrix is BlockSparseMatrix


@pytest.mark.cuda
def test_layer_made_under_a_cuda_default_device_runs():
    """`with torch.device("cuda")`: the weight went to the GPU and the index buffers to the CPU, and
    the first forward refused the mix."""
    with torch.device("cuda"):
        layer = BlockSparseLinear(128, 64, density=0.5, block_size=32, dtype=torch.float32)
        x = torch.randn(7, 128)
    assert {t.device.type for t in list(layer.parameters()) + list(layer.buffers())} == {"cuda"}
    ref = x.double() @ layer.dense_weight().double().t() + layer.bias.double()
    assert torch.allclose(layer(x).double(), ref, rtol=1e-2, atol=1e-2)  # TF32 where torch allows it
