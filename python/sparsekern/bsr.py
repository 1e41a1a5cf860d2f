"""Block-sparse matrices and the products on them.

A :class:`BlockSparseMatrix` is a ``rows × cols`` matrix stored as square ``b × b`` blocks
(``b`` ∈ {16, 32, 64, 128}) in BSR order, carrying the three index sets the kernels need:

- row-wise (BSR): ``block_row_offsets`` (rows/b + 1) and ``block_col_indices`` (nnz);
- column-wise (CSC of the block pattern): ``block_col_offsets`` (cols/b + 1), ``block_rows_by_col``
  and ``blocks_by_col`` (a permutation into the values), so that ``.t()`` moves no data;
- the coordinate list: ``block_row_indices`` with ``block_col_indices``.

Products (``torch.library`` custom ops, differentiable in the dense operands and in the values):

- ``dsd(s, x)``: dense = s · x (``s`` may be a transposed view, ``m.t()``);
- ``dds(x, s, bias=None)``: dense = x · s (+ bias), any leading batch dims on ``x``;
- ``sdd(a, b, pattern)``: block-sparse = (a · b) on the blocks of ``pattern`` only.

On CUDA, fp16/bf16 (and fp32 when ``torch.backends.cuda.matmul.allow_tf32`` is on) run on tensor
cores; fp32 without TF32 and fp64 run a slower exact SIMT kernel. Index sets are built and checked
when a matrix is constructed (which may synchronise with the GPU); the products never synchronise.

Pattern learning: :func:`prune_and_regrow` drops the lowest-magnitude blocks of a matrix and grows
as many elsewhere, keeping the optimizer's per-block state consistent (see ``BlockSparseLinear``).
"""
from __future__ import annotations

import math
import numbers
import os
import warnings
from typing import Optional

import torch

from . import _C
from ._core import (traced, _HAS_CUDA_BACKEND, FLOAT_DTYPES, _capturing, _raw_stream, _raw_to_dlpack, _tile_counters,
                    _to_dlpack, as_dlpack, autocast_args, check_backend, check_no_transform, dtype_name, persistent_buffer, stream_of,
                    tile_counter, needs_graph, refuse_forward_ad, special)

__all__ = ["BlockSparseMatrix", "dsd", "dds", "sdd", "prune_and_regrow", "BLOCK_SIZES"]

BLOCK_SIZES = (16, 32, 64, 128)
_INDEX_NAMES = ("block_row_offsets", "block_col_indices", "block_row_indices", "block_col_offsets",
                "block_rows_by_col", "blocks_by_col")

_get_tf32 = torch._C._get_cublas_allow_tf32
_Tensor = torch.Tensor
_UINT8 = torch.uint8
# fp32 products with TF32 on a Hopper GPU get a device workspace for transposed copies of the
# operands that wgmma must read K-major (DdsParams/SddParams::workspace): the blocks of dds with
# op(S) = S, the dense operands of sdd. SPARSEKERN_BSR_TF32_COPIES=0 (or setting this to False)
# withholds it, keeping those products on the SM80 kernels (an sdd given K-major operands still
# runs wgmma): for comparisons.
_tf32_copies = os.environ.get("SPARSEKERN_BSR_TF32_COPIES", "1") != "0"
# sdd on CUDA may compute the whole product with cuBLAS and copy the pattern's blocks out of it, where
# the library says that is faster (bsr_sdd_dense_bytes > 0). SPARSEKERN_BSR_SDD_DENSE=0 (or setting
# this to False) withholds its workspace, keeping every sdd on the sampled kernels.
_sdd_dense = os.environ.get("SPARSEKERN_BSR_SDD_DENSE", "auto") != "0"
# Likewise dds may write op(S) dense and multiply with cuBLAS (bsr_dds_dense_bytes > 0);
# SPARSEKERN_BSR_DDS_DENSE=0 (or setting this to False) withholds its workspace.
_dds_dense = os.environ.get("SPARSEKERN_BSR_DDS_DENSE", "auto") != "0"
# The bias gradient of dds(x, Wᵀ, bias) from the weight gradient's sdd (SddParams::a_row_sums)
# instead of a separate pass over ∂ℓ/∂y; SPARSEKERN_BSR_FUSED_BIAS_GRAD=0 (or False here) takes the
# separate pass (_column_sums), for comparisons.
_fused_bias_grad = os.environ.get("SPARSEKERN_BSR_FUSED_BIAS_GRAD", "1") != "0"
# On by default (SPARSEKERN_BSR_CONCURRENT_GRADS=0, or False here, turns it off): while a CUDA graph
# is being captured, the eager backward of dds (BlockSparseLinear's) runs the weight (and bias)
# gradient on a side stream forked from the capturing one and joined back: the two gradients are
# independent, so the graph gets them as parallel branches, which the GPU runs side by side (a
# persistent kernel's last wave, or a write-bound input gradient, leaves SMs to the other). H100,
# 8192-row layers, graph µs per backward in order → concurrent (session 26,
# tools/diag/bsr_concurrent_grads.py): bf16 3072 → 768 b = 128 d = 0.1 57.3 → 51.9 (65.6 → 54.1
# with the bias), 4096 → 4096 b = 64 d = 0.25 412 → 394, b = 128 d = 0.5 508 → 487, TF32 b = 128
# d = 0.1 453 → 431-437; input and weight gradients bit-identical. Opt-in in session 26 because a
# capture failed under compute-sanitizer; session 27 (tools/diag/bsr_capture_order.py) saw that
# failure with the fork off as well: a capture after an eager backward on the default stream fails
# under the sanitizer either way. Never outside a capture: launched one after the other from the
# host, the side stream's persistent kernel held every SM before the input gradient's was launched
# (no overlap) and the fork and join added host time: eager backwards got slower (bf16 b = 128
# d = 0.5 482-512 → 615-621 µs, 768 → 3072 d = 0.1 175-219 → 340; tools/diag/bsr_concurrent_eager.py).
_concurrent_grads = os.environ.get("SPARSEKERN_BSR_CONCURRENT_GRADS", "1") != "0"
_INT32 = torch.int32
_FLOAT32 = torch.float32


# --------------------------------------------------------------------------------------------
# Argument checks (shared by the public functions, the custom ops and their fake kernels)
# --------------------------------------------------------------------------------------------
def check_block_size(block_size) -> int:
    # numbers.Integral: NumPy integers (e.g. read from a config array) count as ints.
    if isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral) or \
            int(block_size) not in BLOCK_SIZES:
        raise ValueError(f"`block_size` must be one of {BLOCK_SIZES}; got {block_size!r}")
    return int(block_size)


def check_density(density) -> float:
    if isinstance(density, bool) or not isinstance(density, numbers.Real) or not (0.0 < float(density) <= 1.0):
        raise ValueError(f"`density` must be in (0, 1]; got {density!r}")
    return float(density)


def _check_shape_divisible(shape, block_size: int, name: str = "shape") -> None:
    rows, cols = shape
    if rows < 0 or cols < 0 or rows % block_size or cols % block_size:
        raise ValueError(f"`block_size` {block_size} must divide the {name} {rows}x{cols} "
                         f"(both dims must be multiples of the block size)")


def _check_float(name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor; got {type(t).__name__}")
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"`{name}` must have dtype float16, bfloat16, float32 or float64; got {dtype_name(t.dtype)}")


def _check_like(name: str, t: torch.Tensor, ref_name: str, ref: torch.Tensor) -> None:
    # `s` is the block-sparse operand of dsd / dds, which a BlockSparseLinear's caller never names
    what = "`s` (the block-sparse matrix: a BlockSparseLinear's weight)" if ref_name == "s" else f"`{ref_name}`"
    if t.device != ref.device:
        raise ValueError(f"`{name}` must be on the device of {what} ({ref.device}); got {t.device}")
    if t.dtype != ref.dtype:
        raise TypeError(f"`{name}` must have the dtype of {what} ({dtype_name(ref.dtype)}); "
                        f"got {dtype_name(t.dtype)}")


def _check_values(values: torch.Tensor, rows: int, cols: int) -> int:
    _check_float("values", values)
    if values.dim() != 3 or values.shape[1] != values.shape[2]:
        raise ValueError(f"`values` must be (nnz_blocks, b, b); got shape {tuple(values.shape)}")
    b = check_block_size(int(values.shape[1]))
    _check_shape_divisible((rows, cols), b, "sparse matrix shape")
    check_backend("values", values)
    return b


# --------------------------------------------------------------------------------------------
# Index sets
# --------------------------------------------------------------------------------------------
def _derive_index_sets(row_offsets: torch.Tensor, col_indices: torch.Tensor, n_block_rows: int,
                       n_block_cols: int):
    """Coordinate list and column-wise set from a (valid) row-wise set. int32, same device."""
    dev = col_indices.device
    nnz = col_indices.numel()
    counts = (row_offsets[1:] - row_offsets[:-1]).long()
    row_indices = torch.repeat_interleave(torch.arange(n_block_rows, device=dev), counts,
                                          output_size=nnz).to(torch.int32)
    key = col_indices.long() * max(n_block_rows, 1) + row_indices.long()
    blocks_by_col = torch.argsort(key, stable=True).to(torch.int32)
    rows_by_col = row_indices[blocks_by_col.long()]
    # (scatter_add, not bincount: bincount's output size is data, a host sync on the GPU and a
    # graph break under torch.compile; the clamp keeps an unvalidated index in bounds)
    cols_long = col_indices.long().clamp(0, max(n_block_cols - 1, 0))
    col_counts = torch.zeros(n_block_cols, dtype=torch.long, device=dev).scatter_add_(
        0, cols_long, torch.ones_like(cols_long))
    col_offsets = torch.zeros(n_block_cols + 1, dtype=torch.int32, device=dev)
    col_offsets[1:] = torch.cumsum(col_counts, 0).to(torch.int32)
    return row_indices, col_offsets, rows_by_col.contiguous(), blocks_by_col.contiguous()


@torch.library.custom_op("sparsekern::bsr_index_sets_for_call", mutates_args=())
def _index_sets_for_call(row_offsets: torch.Tensor, col_indices: torch.Tensor, rows: int, cols: int,
                         block_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The four derived sets of a stored pattern that a traced call met (BlockSparseLinear under
    torch.compile with another layer's pattern), validated first: one opaque op, since tracing the
    derivation cannot validate the data. Validation copies the two sets to the host, which a CUDA
    graph capture (torch.compile's mode="reduce-overhead") cannot do: there the sets are taken as
    they are, like every index set a captured product reads."""
    if not (row_offsets.is_cuda and torch.cuda.is_current_stream_capturing()):
        _validate_index_sets(int(col_indices.numel()), rows, cols, block_size,
                             {"block_row_offsets": row_offsets, "block_col_indices": col_indices})
    return tuple(_derive_index_sets(row_offsets, col_indices, rows // block_size, cols // block_size))


@_index_sets_for_call.register_fake
def _(row_offsets, col_indices, rows, cols, block_size):
    nnz, cb = col_indices.numel(), cols // block_size
    return (col_indices.new_empty(nnz), col_indices.new_empty(cb + 1), col_indices.new_empty(nnz),
            col_indices.new_empty(nnz))


def _pattern_from_mask(mask: torch.Tensor):
    """Row-wise index set (int32) of a (block_rows × block_cols) boolean mask."""
    nz = mask.nonzero()
    rows, cols = nz[:, 0], nz[:, 1]
    offsets = torch.zeros(mask.shape[0] + 1, dtype=torch.int32, device=mask.device)
    offsets[1:] = torch.cumsum(torch.bincount(rows, minlength=mask.shape[0]), 0).to(torch.int32)
    return offsets, cols.to(torch.int32).contiguous()


_INT32_MIN, _INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def _index_to_int32(name: str, t: torch.Tensor) -> torch.Tensor:
    """`t` (on the CPU) as int32; an int64 entry outside int32 is out of range for any matrix the
    kernels take, and refused here (a plain cast wraps it into range: 2**32 + 1 became 1)."""
    if t.dtype == torch.int64 and t.numel():
        lo, hi = (int(v) for v in t.aminmax())
        if lo < _INT32_MIN or hi > _INT32_MAX:
            raise ValueError(f"`{name}` holds {hi if hi > _INT32_MAX else lo}, out of range (index sets are "
                             f"int32 on the device)")
    return t.to(torch.int32).contiguous()


def _validate_index_sets(nnz: int, rows: int, cols: int, b: int, sets: dict) -> None:
    cpu = {k: (_index_to_int32(k, v.detach().to("cpu")) if v is not None else None)
           for k, v in sets.items()}
    _C.bsr_validate(nnz, rows, cols, b, *(as_dlpack(cpu.get(k)) if cpu.get(k) is not None else None
                                          for k in _INDEX_NAMES))


def _check_index_tensor(name: str, t, device) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor; got {type(t).__name__}")
    if t.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"`{name}` must be an int32 or int64 tensor; got {dtype_name(t.dtype)}")
    if t.dim() != 1:
        raise ValueError(f"`{name}` must be 1-D; got shape {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"`{name}` must be on the device of `values` ({device}); got {t.device}")


# --------------------------------------------------------------------------------------------
# BlockSparseMatrix
# --------------------------------------------------------------------------------------------
class BlockSparseMatrix:
    """A block-sparse matrix: BSR values plus row-wise, column-wise and coordinate index sets.

    Build one with :meth:`from_dense`, :meth:`from_mask`, :meth:`random`, :meth:`from_torch_bsr`
    or :meth:`from_state_dict`, or directly from BSR arrays::

        m = BlockSparseMatrix(values, block_row_offsets, block_col_indices, shape=(rows, cols))

    ``values`` is ``(nnz_blocks, b, b)``; blocks are stored row-major in BSR order. ``m.t()`` is a
    view of the transpose sharing every tensor. ``values`` may require grad (or be an
    ``nn.Parameter``): the products are differentiable in it.
    """

    def __init__(self, values: torch.Tensor, block_row_offsets: torch.Tensor,
                 block_col_indices: torch.Tensor, shape, *, validate: bool = True,
                 _derived=None, _transposed: bool = False):
        if not isinstance(shape, (tuple, list, torch.Size)) or len(shape) != 2:
            raise ValueError(f"`shape` must be (rows, cols); got {shape!r}")
        rows, cols = int(shape[0]), int(shape[1])
        b = _check_values(values, rows, cols)
        dev = values.device
        _check_index_tensor("block_row_offsets", block_row_offsets, dev)
        _check_index_tensor("block_col_indices", block_col_indices, dev)
        rb, cb = rows // b, cols // b
        if block_row_offsets.numel() != rb + 1:
            raise ValueError(f"`block_row_offsets` must have rows/b + 1 = {rb + 1} entries; "
                             f"got {block_row_offsets.numel()}")
        if block_col_indices.numel() != values.shape[0]:
            raise ValueError(f"`block_col_indices` must have one entry per block of `values` "
                             f"({values.shape[0]}); got {block_col_indices.numel()}")
        nnz = int(values.shape[0])
        if validate:  # on the given tensors: an int64 index outside int32 must not wrap into range
            _validate_index_sets(nnz, rows, cols, b, {"block_row_offsets": block_row_offsets,
                                                       "block_col_indices": block_col_indices})
        row_offsets = block_row_offsets.to(torch.int32).contiguous()
        col_indices = block_col_indices.to(torch.int32).contiguous()
        if _derived is None:
            _derived = _derive_index_sets(row_offsets, col_indices, rb, cb)
        self.values = values
        self.block_row_offsets = row_offsets
        self.block_col_indices = col_indices
        (self.block_row_indices, self.block_col_offsets, self.block_rows_by_col,
         self.blocks_by_col) = _derived
        self.block_size = b
        self._storage_shape = (rows, cols)
        self.transposed = bool(_transposed)

    # -- views and properties ------------------------------------------------------------------
    @property
    def shape(self) -> torch.Size:
        r, c = self._storage_shape
        return torch.Size((c, r) if self.transposed else (r, c))

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    @property
    def device(self) -> torch.device:
        return self.values.device

    @property
    def nnz_blocks(self) -> int:
        return int(self.values.shape[0])

    @property
    def density(self) -> float:
        r, c = self._storage_shape
        total = (r // self.block_size) * (c // self.block_size)
        return self.nnz_blocks / total if total else 0.0

    def index_sets(self) -> tuple:
        """The six index tensors, in the order the custom ops take them."""
        return (self.block_row_offsets, self.block_col_indices, self.block_row_indices,
                self.block_col_offsets, self.block_rows_by_col, self.blocks_by_col)

    def _like(self, values: torch.Tensor, transposed: Optional[bool] = None) -> "BlockSparseMatrix":
        """Same pattern (tensors shared, no checks), other values."""
        out = BlockSparseMatrix.__new__(BlockSparseMatrix)
        # Attribute by attribute, not __dict__.update: torch.compile (dynamo in torch 2.11) cannot
        # trace dict updates of a user object, and BlockSparseLinear.forward calls .t().
        for name in _INDEX_NAMES:
            setattr(out, name, getattr(self, name))
        out.block_size = self.block_size
        out._storage_shape = self._storage_shape
        out.values = values
        out.transposed = self.transposed if transposed is None else transposed
        return out

    def t(self) -> "BlockSparseMatrix":
        """The transpose, sharing values and index sets (no data movement)."""
        return self._like(self.values, not self.transposed)

    @property
    def T(self) -> "BlockSparseMatrix":  # noqa: N802 - torch naming
        return self.t()

    def with_values(self, values: torch.Tensor) -> "BlockSparseMatrix":
        """Same pattern and orientation, new values of the same shape."""
        if not isinstance(values, torch.Tensor) or values.shape != self.values.shape:
            raise ValueError(f"`values` must have shape {tuple(self.values.shape)}; got "
                             f"{tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__}")
        if values.device != self.device:
            raise ValueError(f"`values` must be on {self.device}; got {values.device}")
        _check_float("values", values)
        return self._like(values)

    def to(self, *args, **kwargs) -> "BlockSparseMatrix":
        """``Tensor.to`` semantics: moves the index sets with the device, casts only the values."""
        values = self.values.to(*args, **kwargs)
        out = self._like(values)
        if values.device != self.device:
            for name in _INDEX_NAMES:
                setattr(out, name, getattr(self, name).to(values.device))
        return out

    def detach(self) -> "BlockSparseMatrix":
        return self._like(self.values.detach())

    def mask(self) -> torch.Tensor:
        """Boolean (block_rows × block_cols) pattern of the logical matrix."""
        r, c = self._storage_shape
        m = torch.zeros(r // self.block_size, c // self.block_size, dtype=torch.bool, device=self.device)
        m[self.block_row_indices.long(), self.block_col_indices.long()] = True
        return m.t() if self.transposed else m

    def to_dense(self) -> torch.Tensor:
        """Dense copy (differentiable in ``values``)."""
        r, c = self._storage_shape
        b = self.block_size
        grid = self.values.new_zeros(r // b, c // b, b, b)
        grid = grid.index_put((self.block_row_indices.long(), self.block_col_indices.long()), self.values)
        dense = grid.permute(0, 2, 1, 3).reshape(r, c)
        return dense.t() if self.transposed else dense

    def to_torch_bsr(self) -> torch.Tensor:
        """A ``torch.sparse_bsr`` tensor of the logical matrix (a transposed view is materialised)."""
        if not self.transposed:
            crow, col, vals = self.block_row_offsets, self.block_col_indices, self.values
        else:
            crow, col = self.block_col_offsets, self.block_rows_by_col
            vals = self.values[self.blocks_by_col.long()].transpose(-1, -2).contiguous()
        with warnings.catch_warnings():  # "BSR support is in beta state"
            warnings.simplefilter("ignore", UserWarning)
            # The index sets were validated at construction: torch's own check would be redundant.
            return torch.sparse_bsr_tensor(crow, col, vals, size=self.shape, check_invariants=False)

    def state_dict(self) -> dict:
        """Tensors that rebuild the matrix with :meth:`from_state_dict` (index sets are derived)."""
        r, c = self._storage_shape
        return {"values": self.values.detach(), "block_row_offsets": self.block_row_offsets,
                "block_col_indices": self.block_col_indices,
                "shape": torch.tensor([r, c], dtype=torch.int64),
                "transposed": torch.tensor(self.transposed)}

    @classmethod
    def from_state_dict(cls, state: dict) -> "BlockSparseMatrix":
        for key in ("values", "block_row_offsets", "block_col_indices", "shape"):
            if key not in state:
                raise ValueError(f"`state` is missing {key!r}")
        shape = tuple(int(x) for x in state["shape"].tolist())
        m = cls(state["values"], state["block_row_offsets"].to(state["values"].device),
                state["block_col_indices"].to(state["values"].device), shape)
        if "transposed" in state and bool(state["transposed"]):
            m = m.t()
        return m

    def __repr__(self) -> str:
        return (f"BlockSparseMatrix(shape={tuple(self.shape)}, block_size={self.block_size}, "
                f"nnz_blocks={self.nnz_blocks}, density={self.density:.3g}, dtype={dtype_name(self.dtype)}, "
                f"device={self.device}{', transposed' if self.transposed else ''})")

    def __matmul__(self, other):
        if isinstance(other, torch.Tensor):
            return dsd(self, other)
        return NotImplemented

    def __rmatmul__(self, other):
        if isinstance(other, torch.Tensor):
            return dds(other, self)
        return NotImplemented

    # -- constructors --------------------------------------------------------------------------
    @classmethod
    def from_mask(cls, mask: torch.Tensor, block_size: int, values: Optional[torch.Tensor] = None, *,
                  dtype=None, device=None) -> "BlockSparseMatrix":
        """Pattern from a boolean (rows/b × cols/b) block mask; values from a dense tensor of the
        full shape (its blocks are copied), or zeros."""
        b = check_block_size(block_size)
        if not isinstance(mask, torch.Tensor) or mask.dim() != 2:
            raise ValueError("`mask` must be a 2-D boolean tensor of blocks")
        mask = mask.to(torch.bool)
        rows, cols = mask.shape[0] * b, mask.shape[1] * b
        if values is not None:
            _check_float("values", values)
            if values.shape != (rows, cols):
                raise ValueError(f"`values` must be the dense {rows}x{cols} matrix for a "
                                 f"{tuple(mask.shape)} block mask; got {tuple(values.shape)}")
            device = values.device if device is None else device
            dtype = values.dtype if dtype is None else dtype
        device = torch.device(device) if device is not None else mask.device
        dtype = dtype or torch.get_default_dtype()
        mask = mask.to(device)
        offsets, cols_idx = _pattern_from_mask(mask)
        rows_idx = torch.nonzero(mask)[:, 0]
        if values is not None:
            grid = values.to(device).reshape(rows // b, b, cols // b, b).permute(0, 2, 1, 3)
            vals = grid[rows_idx, cols_idx.long()].to(dtype).contiguous()
        else:
            vals = torch.zeros(int(cols_idx.numel()), b, b, dtype=dtype, device=device)
        return cls(vals, offsets, cols_idx, (rows, cols), validate=False)

    @classmethod
    def from_dense(cls, dense: torch.Tensor, block_size: int, mask: Optional[torch.Tensor] = None, *,
                   density: Optional[float] = None) -> "BlockSparseMatrix":
        """Blocks of ``dense``: those of ``mask``, or the ``density`` fraction with the largest
        Frobenius norm (at least one block), or every non-zero block when neither is given."""
        _check_float("dense", dense)
        if dense.dim() != 2:
            raise ValueError(f"`dense` must be 2-D; got shape {tuple(dense.shape)}")
        b = check_block_size(block_size)
        _check_shape_divisible(tuple(dense.shape), b, "shape of `dense`")
        if mask is not None and density is not None:
            raise ValueError("give `mask` or `density`, not both")
        rb, cb = dense.shape[0] // b, dense.shape[1] // b
        norms = dense.detach().reshape(rb, b, cb, b).float().pow(2).sum(dim=(1, 3))
        if mask is None:
            if density is None:
                mask = norms > 0
            else:
                mask = _top_blocks(norms, check_density(density))
        elif mask.shape != (rb, cb):
            raise ValueError(f"`mask` must be ({rb}, {cb}) for a {tuple(dense.shape)} matrix with "
                             f"{b}x{b} blocks; got {tuple(mask.shape)}")
        return cls.from_mask(mask, b, dense.detach())

    @classmethod
    def random(cls, shape, block_size: int, density: float, *, dtype=None, device=None,
               generator: Optional[torch.Generator] = None, std: float = 1.0) -> "BlockSparseMatrix":
        """Uniformly random pattern with round(density · blocks) blocks (at least one) and N(0, std²)
        values."""
        b = check_block_size(block_size)
        d = check_density(density)
        if not isinstance(shape, (tuple, list, torch.Size)) or len(shape) != 2:
            raise ValueError(f"`shape` must be (rows, cols); got {shape!r}")
        rows, cols = int(shape[0]), int(shape[1])
        _check_shape_divisible((rows, cols), b)
        rb, cb = rows // b, cols // b
        mask = random_mask(rb, cb, d, generator=generator)
        m = cls.from_mask(mask, b, dtype=dtype or torch.get_default_dtype(), device=device or "cpu")
        vals = torch.randn(m.values.shape, generator=generator, dtype=torch.float32) * std
        m.values = vals.to(dtype=m.values.dtype, device=m.values.device)
        return m

    @classmethod
    def from_torch_bsr(cls, t: torch.Tensor) -> "BlockSparseMatrix":
        """From a ``torch.sparse_bsr`` tensor with square blocks."""
        if not isinstance(t, torch.Tensor) or t.layout != torch.sparse_bsr:
            raise ValueError("`t` must be a torch.sparse_bsr tensor")
        vals = t.values()
        if t.dim() != 2:
            raise ValueError(f"`t` must be a 2-D BSR matrix; got a {t.dim()}-D (batched) tensor of shape "
                             f"{tuple(t.shape)}")
        if vals.dim() != 3 or vals.shape[1] != vals.shape[2]:
            raise ValueError(f"`t` must have square blocks; got blocks of {tuple(vals.shape[1:])}")
        return cls(vals.contiguous(), t.crow_indices(), t.col_indices(), tuple(t.shape))


def num_blocks_for(density: float, total_blocks: int) -> int:
    """round(density · total) blocks, at least one (a non-empty layer)."""
    return max(1, min(total_blocks, int(round(check_density(density) * total_blocks))))


def random_mask(block_rows: int, block_cols: int, density: float, *,
                generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """A CPU mask (also under a `with torch.device(...)` default)."""
    total = block_rows * block_cols
    k = num_blocks_for(density, total)
    pick = torch.randperm(total, generator=generator, device="cpu")[:k]
    mask = torch.zeros(total, dtype=torch.bool, device="cpu")
    mask[pick] = True
    return mask.view(block_rows, block_cols)


def _top_blocks(norms: torch.Tensor, density: float) -> torch.Tensor:
    k = num_blocks_for(density, norms.numel())
    pick = torch.topk(norms.flatten(), k).indices
    mask = torch.zeros(norms.numel(), dtype=torch.bool, device=norms.device)
    mask[pick] = True
    return mask.view(norms.shape)


# --------------------------------------------------------------------------------------------
# Layout preparation for the CUDA tensor-core path (CPU kernels take any strides)
# --------------------------------------------------------------------------------------------
def _vec(t: torch.Tensor) -> int:
    return 16 // t.element_size()


def _row_major_ok(t: torch.Tensor) -> bool:
    (r, c), (sr, sc) = t.shape, t.stride()
    return r == 0 or c == 0 or ((sc == 1 or c <= 1) and (sr % _vec(t) == 0 or r <= 1) and t.data_ptr() % 16 == 0)


def _col_major_ok(t: torch.Tensor) -> bool:
    (r, c), (sr, sc) = t.shape, t.stride()
    return r == 0 or c == 0 or ((sr == 1 or r <= 1) and (sc % _vec(t) == 0 or c <= 1) and t.data_ptr() % 16 == 0)


def _blas_ok(t: torch.Tensor) -> torch.Tensor:
    """`t` if cuBLAS reads it as it is (a unit stride along one dim, 16-byte aligned), else a
    row-major copy."""
    return t if _row_major_ok(t) or _col_major_ok(t) else _row_major(t)


def _row_major(t: torch.Tensor) -> torch.Tensor:
    """Unit column stride, 16-byte aligned rows (copy only when needed; CUDA only)."""
    return t if not t.is_cuda or _row_major_ok(t) else t.contiguous()


def _col_major(t: torch.Tensor) -> torch.Tensor:
    """Unit row stride, 16-byte aligned columns (copy only when needed; CUDA only)."""
    return t if not t.is_cuda or _col_major_ok(t) else t.t().contiguous().t()


def _allow_tf32(t: torch.Tensor) -> bool:
    return t.is_cuda and t.dtype is _FLOAT32 and bool(_get_tf32())


def _idx(t: Optional[torch.Tensor]):
    return None if t is None else as_dlpack(t)


# --------------------------------------------------------------------------------------------
# Implementations (validated tensors in, fresh outputs)
# --------------------------------------------------------------------------------------------
# Every op checks its arguments in Python (errors name the argument; the fake kernels raise the
# same ones). The checks are on the host path of every call, which at low density costs more than
# the kernel (issue 3), so the hot ones first run a fast test that reads each tensor property once
# and builds no message. A fast test accepts a subset of what the full checks accept (int32 index
# sets only, CPU or CUDA operands); anything else goes through the full checks, which raise the
# errors they always did (test_bsr checks both on the same inputs).
def _index_sets_ok(index, device) -> bool:
    """The six index sets are int32, 1-D and on `device` (fast test of the _check_index_tensor loop)."""
    if type(index) is not tuple or len(index) != 6:
        return False
    for t in index:
        if not (isinstance(t, _Tensor) and t.dtype is _INT32 and t.dim() == 1 and t.device == device):
            return False
    return True


def _check_index_sets(index, device) -> None:
    if len(index) != 6:
        raise ValueError("expected the six index-set tensors")
    for name, t in zip(_INDEX_NAMES, index):
        _check_index_tensor(name, t, device)


def _check_op(values, index, rows, cols, fast: bool = True) -> int:
    """Block size of `values`; checks it and the index sets (`fast`: with the fast test first)."""
    b = _check_values(values, rows, cols)
    if not (fast and _index_sets_ok(index, values.device)):
        _check_index_sets(index, values.device)
    return b


def _dds_args_ok(a, values, index, rows, cols, transpose, bias):
    """(m, n) when every check of _check_dds_args_full passes (its fast test), else None."""
    if not (isinstance(a, _Tensor) and isinstance(values, _Tensor)):
        return None
    dt, dev = values.dtype, values.device
    vs, sa = values.shape, a.shape
    k, n = (cols, rows) if transpose else (rows, cols)
    if not (len(vs) == 3 and len(sa) == 2 and sa[1] == k and a.dtype is dt and dt in FLOAT_DTYPES
            and vs[1] == vs[2] and vs[1] in BLOCK_SIZES and rows >= 0 and cols >= 0
            and rows % vs[1] == 0 and cols % vs[1] == 0 and a.device == dev
            and (values.is_cpu or (values.is_cuda and _HAS_CUDA_BACKEND))):
        return None
    if bias is not None and not (isinstance(bias, _Tensor) and bias.dtype is dt and bias.dim() == 1
                                 and bias.shape[0] == n and bias.device == dev):
        return None
    if not _index_sets_ok(index, dev):
        return None
    return sa[0], n


def _check_dds_args(a, values, index, rows, cols, transpose, bias):
    """(m, n) of the product; raises naming the bad argument."""
    mn = _dds_args_ok(a, values, index, rows, cols, transpose, bias)
    return mn if mn is not None else _check_dds_args_full(a, values, index, rows, cols, transpose, bias)


def _check_dds_args_full(a, values, index, rows, cols, transpose, bias):
    _check_float("x", a)
    _check_op(values, index, rows, cols, fast=False)
    _check_like("x", a, "s", values)
    if a.dim() != 2:
        raise ValueError(f"`x` must be 2-D here; got shape {tuple(a.shape)}")
    k, n = (cols, rows) if transpose else (rows, cols)
    if a.shape[1] != k:
        raise ValueError(f"`x` must have {k} columns (the rows of the {k}x{n} sparse operand); "
                         f"got shape {tuple(a.shape)}")
    if bias is not None:
        _check_float("bias", bias)
        _check_like("bias", bias, "s", values)
        if bias.shape != (n,):
            raise ValueError(f"`bias` must have shape ({n},); got {tuple(bias.shape)}")
    return a.shape[0], n


def _dds_impl(a, values, index, rows, cols, transpose, bias, checked=False):
    """`checked`: as for _sdd_impl (a backward pass whose operands passed the forward's checks)."""
    if checked:
        m, n, fast = a.shape[0], rows if transpose else cols, True
    else:
        mn = _dds_args_ok(a, values, index, rows, cols, transpose, bias)
        fast = mn is not None
        m, n = mn if fast else _check_dds_args_full(a, values, index, rows, cols, transpose, bias)
    out = a.new_empty(m, n)  # the (m, n) varargs form parses ~0.5 µs faster than a size tuple
    if m == 0 or n == 0:
        return out
    cuda = a.is_cuda
    a = _row_major(a)
    if bias is not None:
        bias = bias.contiguous()
    ro, ci, _, co, rbc, bbc = index
    # Only the index set the kernel reads crosses to the binding (None for the others, as the
    # binding allows): a capsule and its check in the binding cost ~0.2 µs each (CPU). The sets
    # left out were checked above (int32, 1-D, on the device); the binding checks the ones that
    # cross in full (length, contiguity, and on the CPU their contents, as before).
    if not fast:  # e.g. int64 index sets: all cross, for the binding to check (and refuse)
        sets = (_idx(ro), _idx(ci), _idx(co), _idx(rbc), _idx(bbc))
    elif transpose:  # op(S) = Sᵀ reads S row by row: the row-wise set
        sets = (_raw_to_dlpack(ro), _raw_to_dlpack(ci), None, None, None)
    else:  # the column-wise set, and block_col_indices for the CPU cross-check of blocks_by_col
        sets = (None, _raw_to_dlpack(ci), _raw_to_dlpack(co), _raw_to_dlpack(rbc), _raw_to_dlpack(bbc))
    tf32 = cuda and a.dtype is _FLOAT32 and bool(_get_tf32())
    if cuda:
        device = a.get_device()
        stream = _raw_stream(device)
        ws = _tile_counters.get((device, stream)) or tile_counter(a, stream)
        dense = _dds_dense_bytes(values, transpose, tf32, device, rows, cols, m) if _dds_dense else 0
        buf = _try_workspace(dense, a.device) if dense else None
        if buf is not None:  # op(S) written dense and one cuBLAS product (see DdsParams::workspace)
            ws = (buf.data_ptr(), dense, buf)
        elif tf32 and not transpose and _tf32_copies:  # room for the transposed blocks (Hopper)
            nbytes = _C.bsr_dds_workspace_bytes(values.shape[0], values.shape[1], False, True, device, rows, cols)
            buf = _try_workspace(nbytes, a.device) if nbytes > ws[1] else None
            if buf is not None:
                ws = (buf.data_ptr(), nbytes, buf)
    else:
        stream, ws = 0, (0, 0)
    _C.bsr_dds(_to_dlpack(a), _to_dlpack(values.contiguous()), rows, cols, values.shape[1], *sets,
               transpose, None if bias is None else _to_dlpack(bias), _raw_to_dlpack(out),
               tf32, stream, ws[0], ws[1])
    return out


# The dense-path workspace queries per problem shape: the binding call costs ~1 µs of host time
# per product, the dict lookup a fraction of that.
_dense_bytes_cache: dict = {}


def _cached_bytes(key, query) -> int:
    nbytes = _dense_bytes_cache.get(key)
    if nbytes is None:
        if len(_dense_bytes_cache) > 4096:
            _dense_bytes_cache.clear()
        nbytes = _dense_bytes_cache[key] = query()
    return nbytes


def _dds_dense_bytes(values, transpose, tf32, device, rows, cols, m) -> int:
    """bsr_dds_dense_bytes for this product, cached."""
    nnz, b, dt = values.shape[0], values.shape[1], values.dtype
    return _cached_bytes(("dds", nnz, b, transpose, tf32, device, rows, cols, m, dt), lambda: _C.bsr_dds_dense_bytes(
        nnz, b, transpose, tf32, device, rows, cols, m, dtype_name(dt)))


def _sdd_query(query, a, b, like_values, tf32):
    """query(m, k, n, block, nnz, tf32, device, dtype) for this product (one of the bsr_sdd_*
    workspace queries of the binding), cached per query and problem."""
    (m, k), n, (nnz, blk), device = a.shape, b.shape[1], like_values.shape[:2], a.get_device()
    return _cached_bytes((query, m, k, n, nnz, blk, tf32, device, a.dtype), lambda: query(
        m, k, n, blk, nnz, tf32, device, dtype_name(a.dtype)))


def _sdd_dense_bytes(a, b, like_values, tf32) -> int:
    """bsr_sdd_dense_bytes for this product, cached."""
    return _sdd_query(_C.bsr_sdd_dense_bytes, a, b, like_values, tf32)


def _sdd_split_bytes(a, b, like_values, tf32) -> int:
    """bsr_sdd_split_bytes for a product that does not take the dense path (the room for its
    split-K partials, or 0), cached."""
    return _sdd_query(_C.bsr_sdd_split_bytes, a, b, like_values, tf32)


def _sdd_row_sums_bytes(a, b, like_values, tf32) -> int:
    """bsr_sdd_row_sums_bytes for this product (the workspace of a_row_sums), cached."""
    return _sdd_query(_C.bsr_sdd_row_sums_bytes, a, b, like_values, tf32)


def _sdd_row_sums_fused(a, b, like_values, tf32) -> bool:
    """bsr_sdd_row_sums_fused for this product (whether its kernel sums a's rows itself), cached."""
    return _sdd_query(_C.bsr_sdd_row_sums_fused, a, b, like_values, tf32)


def _check_dsd_args(values, index, rows, cols, transpose, b):
    _check_float("x", b)
    _check_op(values, index, rows, cols)
    _check_like("x", b, "s", values)
    if b.dim() != 2:
        raise ValueError(f"`x` must be 2-D; got shape {tuple(b.shape)}")
    m, k = (cols, rows) if transpose else (rows, cols)
    if b.shape[0] != k:
        raise ValueError(f"`x` must have {k} rows (the columns of the {m}x{k} sparse operand); "
                         f"got shape {tuple(b.shape)}")
    return m, b.shape[1]


def _dsd_impl(values, index, rows, cols, transpose, b):
    m, n = _check_dsd_args(values, index, rows, cols, transpose, b)
    out = torch.empty((m, n), dtype=b.dtype, device=b.device)
    if out.numel() == 0:
        return out
    target = out
    if b.is_cuda:
        b = _col_major(b)
        # The kernel writes C column by column of Cᵀ: rows of C must start 16-byte aligned.
        vec = _vec(out)
        if n % vec and m > 1:
            target = torch.empty((m, n + vec - n % vec), dtype=b.dtype, device=b.device)[:, :n]
    ro, ci, _, co, rbc, bbc = index
    _C.bsr_dsd(as_dlpack(values.contiguous()), rows, cols, values.shape[1], _idx(ro), _idx(ci),
               _idx(co), _idx(rbc), _idx(bbc), transpose, as_dlpack(b), as_dlpack(target),
               _allow_tf32(b), stream_of(b))
    if target is not out:
        out.copy_(target)
    return out


def _check_sdd_args(a, b, like_values, index, rows, cols):
    _check_float("a", a)
    _check_float("b", b)
    _check_op(like_values, index, rows, cols)
    _check_like("a", a, "pattern", like_values)
    _check_like("b", b, "pattern", like_values)
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"`a` and `b` must be 2-D; got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] != rows or b.shape[1] != cols or a.shape[1] != b.shape[0]:
        raise ValueError(f"`a` · `b` must be {rows}x{cols} (the pattern's shape); got "
                         f"{tuple(a.shape)} · {tuple(b.shape)}")


_empty = torch.empty


def _try_workspace(nbytes: int, device: torch.device) -> Optional[torch.Tensor]:
    """A device workspace for the tf32 copies, or None when the allocation fails: the copies are
    an optimisation (the sdd's are 2 · k · (m + n) · 4 bytes, 256 MB for a 8192-row batch of a
    4096 → 4096 layer), so a GPU near its memory limit runs the SM80 kernels instead of failing."""
    try:
        return _empty(nbytes, dtype=_UINT8, device=device)
    except torch.OutOfMemoryError:
        return None


def _sdd_impl(a, b, like_values, index, rows, cols, checked=False, row_sums=False):
    """`checked`: the caller vouches for the arguments (a backward pass: the pattern and `a`/`b`
    passed the forward's checks, autograd gives the gradient the output's shape, dtype and
    device), which skips ~10 µs of host time per call.

    `row_sums`: also return Σ_j a[i, j] (rows values; a linear layer's bias gradient when `a` is
    ∂ℓ/∂yᵀ), computed by the library next to the product (SddParams::a_row_sums): (values, sums).
    True: always (where the kernel does not sum them itself, the library's column-sum pass does);
    "fused": only where the kernel sums the A tiles it loads anyway (the HMMA sdd; on the CPU
    always), else sums = None and the caller reduces; sums is None too where its workspace could
    not be had."""
    if not checked:
        _check_sdd_args(a, b, like_values, index, rows, cols)
    out = torch.empty_like(like_values, memory_format=torch.contiguous_format)
    if out.numel() == 0 and not row_sums:
        return out
    tf32 = _allow_tf32(a)
    rs = None

    def rows_args(fused: bool) -> dict:
        """The a_row_sums arguments of the _C.bsr_sdd call about to run (`fused`: its kernel sums
        the rows), or none; sets rs."""
        nonlocal rs
        if not row_sums or (row_sums == "fused" and a.is_cuda and not fused):
            return {}
        nbytes = _sdd_row_sums_bytes(a, b, like_values, tf32) if a.is_cuda else 0
        ws = _try_workspace(nbytes, a.device) if nbytes else None
        if nbytes and ws is None:
            return {}
        rs = torch.empty(rows, dtype=a.dtype, device=a.device)
        return dict(block_row_offsets=_idx(index[0]), a_row_sums=as_dlpack(rs),
                    row_sums_workspace=0 if ws is None else ws.data_ptr(), row_sums_workspace_bytes=nbytes)

    if out.numel() == 0:  # no blocks: the row sums alone
        extra = rows_args(False)
        if extra:
            _C.bsr_sdd(as_dlpack(a), as_dlpack(b), rows, cols, like_values.shape[1], _idx(index[2]),
                       _idx(index[1]), as_dlpack(out), tf32, stream_of(a), 0, 0, **extra)
        return out, rs
    ws, nbytes = None, 0
    dense_nbytes = _sdd_dense_bytes(a, b, like_values, tf32) if a.is_cuda else 0
    if dense_nbytes and _sdd_dense:
        # Where the sampled kernels are slower than the dense product they sample (high density,
        # small blocks; see SddParams::workspace), the library computes A · B whole with cuBLAS in
        # a workspace the size of the dense result and copies the blocks out. If that workspace
        # cannot be had, the sampled kernels run.
        ws = _try_workspace(dense_nbytes, a.device)
        if ws is not None:
            a, b = _blas_ok(a), _blas_ok(b)
            _C.bsr_sdd(as_dlpack(a), as_dlpack(b), rows, cols, like_values.shape[1], _idx(index[2]),
                       _idx(index[1]), as_dlpack(out), tf32, stream_of(a), ws.data_ptr(), dense_nbytes,
                       **rows_args(False))
            return (out, rs) if row_sums else out
    # Hopper: K-major operands (a row-major, b column-major) are read as they are; the others are
    # copied K-major into a workspace where the pattern holds enough blocks to repay it (else the
    # SM80 kernel reads them, a column-major and b row-major).
    kmajor = tf32 and _C.bsr_tf32_wgmma(a.get_device(), like_values.shape[1])
    if kmajor and not (_row_major_ok(a) and _col_major_ok(b)):
        if _tf32_copies:
            # The larger of the copies and the SM80 kernel's split-K partials: only copies that
            # outgrow the partials say that the copies pay (else the partials are asked for below).
            nbytes = _C.bsr_sdd_workspace_bytes(a.shape[0], a.shape[1], b.shape[1], like_values.shape[1],
                                                like_values.shape[0], True, a.get_device())
            if nbytes <= _sdd_split_bytes(a, b, like_values, True):
                nbytes = 0
        ws = _try_workspace(nbytes, a.device) if nbytes else None
        if ws is None:
            kmajor, nbytes = False, 0
        else:
            a = a if _row_major_ok(a) else _col_major(a)
            b = b if _col_major_ok(b) else _row_major(b)
    if not kmajor:
        a, b = _col_major(a), _row_major(b)
        if a.is_cuda and dense_nbytes == 0:
            # With few tiles over a long K (a weight gradient of a small layer, or of a sparse
            # pattern, over many rows) the kernel splits K and sums fp32 partials, which live in
            # the workspace (bsr_sdd_split_bytes, 0 where it does not split); no room, no split.
            nbytes = _sdd_split_bytes(a, b, like_values, tf32)
            ws = _try_workspace(nbytes, a.device) if nbytes else None
            if ws is None:
                nbytes = 0
    fused = row_sums == "fused" and a.is_cuda and not kmajor and _sdd_row_sums_fused(a, b, like_values, tf32)
    _C.bsr_sdd(as_dlpack(a), as_dlpack(b), rows, cols, like_values.shape[1], _idx(index[2]),
               _idx(index[1]), as_dlpack(out), tf32, stream_of(a), 0 if ws is None else ws.data_ptr(), nbytes,
               **rows_args(fused))
    return (out, rs) if row_sums else out


# --------------------------------------------------------------------------------------------
# Custom ops + autograd
# --------------------------------------------------------------------------------------------
@torch.library.custom_op("sparsekern::bsr_dds", mutates_args=())
def _dds_op(a: torch.Tensor, values: torch.Tensor, block_row_offsets: torch.Tensor,
            block_col_indices: torch.Tensor, block_row_indices: torch.Tensor,
            block_col_offsets: torch.Tensor, block_rows_by_col: torch.Tensor,
            blocks_by_col: torch.Tensor, rows: int, cols: int, transpose: bool,
            bias: Optional[torch.Tensor]) -> torch.Tensor:
    refuse_forward_ad("bsr_dds")
    index = (block_row_offsets, block_col_indices, block_row_indices, block_col_offsets,
             block_rows_by_col, blocks_by_col)
    return _dds_impl(a, values, index, rows, cols, transpose, bias)


@_dds_op.register_fake
def _(a, values, ro, ci, ri, co, rbc, bbc, rows, cols, transpose, bias):
    m, n = _check_dds_args(a, values, (ro, ci, ri, co, rbc, bbc), rows, cols, transpose, bias)
    return a.new_empty((m, n))


@torch.library.custom_op("sparsekern::bsr_dsd", mutates_args=())
def _dsd_op(values: torch.Tensor, block_row_offsets: torch.Tensor, block_col_indices: torch.Tensor,
            block_row_indices: torch.Tensor, block_col_offsets: torch.Tensor,
            block_rows_by_col: torch.Tensor, blocks_by_col: torch.Tensor, rows: int, cols: int,
            transpose: bool, b: torch.Tensor) -> torch.Tensor:
    refuse_forward_ad("bsr_dsd")
    index = (block_row_offsets, block_col_indices, block_row_indices, block_col_offsets,
             block_rows_by_col, blocks_by_col)
    return _dsd_impl(values, index, rows, cols, transpose, b)


@_dsd_op.register_fake
def _(values, ro, ci, ri, co, rbc, bbc, rows, cols, transpose, b):
    m, n = _check_dsd_args(values, (ro, ci, ri, co, rbc, bbc), rows, cols, transpose, b)
    return b.new_empty((m, n))


@torch.library.custom_op("sparsekern::bsr_sdd", mutates_args=())
def _sdd_op(a: torch.Tensor, b: torch.Tensor, like_values: torch.Tensor,
            block_row_offsets: torch.Tensor, block_col_indices: torch.Tensor,
            block_row_indices: torch.Tensor, block_col_offsets: torch.Tensor,
            block_rows_by_col: torch.Tensor, blocks_by_col: torch.Tensor, rows: int,
            cols: int) -> torch.Tensor:
    refuse_forward_ad("bsr_sdd")
    index = (block_row_offsets, block_col_indices, block_row_indices, block_col_offsets,
             block_rows_by_col, blocks_by_col)
    return _sdd_impl(a, b, like_values, index, rows, cols)


@_sdd_op.register_fake
def _(a, b, like_values, ro, ci, ri, co, rbc, bbc, rows, cols):
    _check_sdd_args(a, b, like_values, (ro, ci, ri, co, rbc, bbc), rows, cols)
    return torch.empty_like(like_values, memory_format=torch.contiguous_format)


# Backward passes are built from the three forward ops (C = product, G = dL/dC):
#   dds  C = A·S  (+bias): dA = dds(G, Sᵀ);  dS = sdd(Aᵀ, G);      dbias = Σ_rows G
#   dds  C = A·Sᵀ (+bias): dA = dds(G, S);   dS = sdd(Gᵀ, A)
#   dsd  C = S·B:          dB = dsd(Sᵀ, G);  dS = sdd(G, Bᵀ)
#   dsd  C = Sᵀ·B:         dB = dsd(S, G);   dS = sdd(B, Gᵀ)
#   sdd  V = (A·B)|P:      dA = dsd(P[dV], Bᵀ); dB = dds(Aᵀ, P[dV])
def _setup_dds(ctx, inputs, output):
    a, values, *index, rows, cols, transpose, bias = inputs
    ctx.save_for_backward(a, values, *index)
    ctx.rows, ctx.cols, ctx.transpose, ctx.has_bias = rows, cols, transpose, bias is not None


def _dds_grads(grad, a, values, index, rows, cols, transpose, need_a, need_v, need_bias, differentiable):
    """(dA, dS values, dbias) of dds per the table above; `differentiable` runs the custom ops (a
    graph for double backward), else the kernels directly."""
    def dds_(x, v, idx, *rest):
        return _dds_op(x, v, *idx, *rest) if differentiable else _dds_impl(x, v, idx, *rest, True)

    def sdd_(x, y, like, idx, *rest):
        return _sdd_op(x, y, like, *idx, *rest) if differentiable else _sdd_impl(x, y, like, idx, *rest, True)

    def weight_grads():
        gv = gbias = None
        if need_v and need_bias and transpose and not differentiable and _fused_bias_grad:
            # y = x · Wᵀ + bias: the bias gradient Σ_rows ∂ℓ/∂y is the row sums of the weight
            # gradient's first operand, ∂ℓ/∂yᵀ, which the HMMA sdd sums as it loads it
            # (SddParams::a_row_sums); where another kernel runs the product, the GEMV below, or,
            # where that has no ones vector to read without allocating one (in a capture on a
            # stream that never ran it eagerly: torch.cuda.graph's warm-up and capture streams
            # differ), the library's column-sum pass (as fast as the GEMV; torch's sum, the other
            # way out, took 2-3x as long: 15-25 µs for 8192 × 768 bf16 on an H100).
            mode = "fused" if not grad.is_cuda or _has_ones(grad, ones_stream) or not _capturing() else True
            gv, gbias = _sdd_impl(grad.t(), a, values, index, rows, cols, True, row_sums=mode)
        elif need_v:
            gv = sdd_(grad.t(), a, values, index, rows, cols) if transpose else sdd_(a.t(), grad, values, index, rows, cols)
        if need_bias and gbias is None:
            gbias = grad.sum(0) if differentiable else _column_sums(grad, ones_stream)
        return gv, gbias

    index = tuple(index)
    ones_stream = None
    if (need_a and need_v and not differentiable and grad.is_cuda and _concurrent_grads
            and not torch.compiler.is_compiling() and _capturing()):
        ones_stream = _raw_stream(grad.get_device())  # the user stream's ones vector (_column_sums)
        gv, gbias = _on_side_stream(grad.device, weight_grads)
        ga = dds_(grad, values, index, rows, cols, not transpose, None)
        _join_side_stream(grad.device, (gv, gbias))
        return ga, gv, gbias
    ga = dds_(grad, values, index, rows, cols, not transpose, None) if need_a else None
    gv, gbias = weight_grads()
    return ga, gv, gbias


# The side streams of _dds_grads' concurrent path: one per (device, user stream).
_side_streams: dict = {}


def _side_stream(device: torch.device) -> torch.cuda.Stream:
    """The side stream of the current stream of `device` (one per user stream, so that two user
    streams never wait on each other's side work)."""
    key = (device.index, _raw_stream(device.index))
    s = _side_streams.get(key)
    if s is None:
        s = _side_streams[key] = torch.cuda.Stream(device)
    return s


def _on_side_stream(device: torch.device, fn):
    """fn()'s result, its kernels enqueued on the side stream of the current stream of `device`
    after what that stream holds so far (the operands are ready); _join_side_stream joins it back."""
    side = _side_stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        return fn()


def _join_side_stream(device: torch.device, made) -> None:
    """The current stream of `device` waits for its side stream; the tensors of `made` (made there,
    used here) are recorded on the current stream, so that the allocator does not hand their memory
    to the side stream again before the current stream is done with them."""
    cur = torch.cuda.current_stream(device)
    cur.wait_stream(_side_stream(device))
    for t in made:
        if t is not None:
            t.record_stream(cur)


# A ones vector per (device, dtype, stream) for _column_sums, grown to the largest row count seen.
# A vector that a larger one replaces stays alive (_ones_retired): a CUDA graph captured while it
# was current reads it at every replay, and torch's graphs do not keep their inputs alive.
_ones: dict = {}
_ones_retired: list = []


def _ones_key(g: torch.Tensor, stream: Optional[int]) -> tuple:
    return (g.get_device(), g.dtype, _raw_stream(g.get_device()) if stream is None else stream)


def _has_ones(g: torch.Tensor, stream: Optional[int] = None) -> bool:
    """Whether _column_sums(g, stream) takes the GEMV without allocating (a CUDA matrix whose row
    count the cached ones vector covers)."""
    ones = _ones.get(_ones_key(g, stream))
    return ones is not None and ones.shape[0] >= g.shape[0] and g.dim() == 2


def _column_sums(g: torch.Tensor, stream: Optional[int] = None) -> torch.Tensor:
    """Σ over the rows of `g` (m × n): the bias gradient of a linear layer. On CUDA a cuBLAS GEMV
    against a cached ones vector, which reads `g` faster than torch's reduction (H100, 8192 rows:
    27 vs 37 µs for 4096 bf16 columns, 7 vs 15 µs for 768, 47 vs 58 µs for 4096 fp32;
    tools/diag/bias_grad.py), else torch's sum. `stream`: the raw stream whose ones vector to read
    (default the current one); the side stream of a captured backward reads its user stream's,
    which that stream filled before the capture (a side stream runs nothing outside captures, so
    it never has one of its own)."""
    if not g.is_cuda or g.dim() != 2 or g.shape[0] == 0:
        return g.sum(0)
    m = g.shape[0]
    key = _ones_key(g, stream)
    ones = _ones.get(key)
    if ones is None or ones.shape[0] < m:
        if _capturing() or stream is not None:  # no allocation that outlives a capture
            return g.sum(0)
        # Like _core's per-stream buffers: allocated by a helper thread on this stream, so that a
        # CUDA-graph tree's warm-up (which routes this thread's allocations to its pool) does not
        # leave a pool allocation in the cache. Grown at least twofold, so that the retired
        # vectors take at most as much memory as the current one.
        n = max(m, 1024, 0 if ones is None else 2 * ones.shape[0])
        buf = persistent_buffer(n * g.element_size(), g.device)
        if ones is not None:
            _ones_retired.append(ones)
        ones = _ones[key] = buf.view(g.dtype)
        ones.fill_(1)
    return torch.mv(g.t(), ones[:m])


def _backward_dds(ctx, grad):
    a, values, *index = ctx.saved_tensors
    ga, gv, gbias = _dds_grads(grad, a, values, index, ctx.rows, ctx.cols, ctx.transpose, ctx.needs_input_grad[0],
                               ctx.needs_input_grad[1], ctx.has_bias and ctx.needs_input_grad[11], True)
    return (ga, gv) + (None,) * 9 + (gbias,)


_dds_op.register_autograd(_backward_dds, setup_context=_setup_dds)


def _setup_dsd(ctx, inputs, output):
    values, *index, rows, cols, transpose, b = inputs
    ctx.save_for_backward(values, b, *index)
    ctx.rows, ctx.cols, ctx.transpose = rows, cols, transpose


def _backward_dsd(ctx, grad):
    values, b, *index = ctx.saved_tensors
    rows, cols, transpose = ctx.rows, ctx.cols, ctx.transpose
    gv = gb = None
    if ctx.needs_input_grad[0]:
        if transpose:
            gv = _sdd_op(b, grad.t(), values, *index, rows, cols)
        else:
            gv = _sdd_op(grad, b.t(), values, *index, rows, cols)
    if ctx.needs_input_grad[10]:
        gb = _dsd_op(values, *index, rows, cols, not transpose, grad)
    return (gv,) + (None,) * 9 + (gb,)


_dsd_op.register_autograd(_backward_dsd, setup_context=_setup_dsd)


def _setup_sdd(ctx, inputs, output):
    a, b, like_values, *index, rows, cols = inputs
    ctx.save_for_backward(a, b, *index)
    ctx.rows, ctx.cols = rows, cols


def _backward_sdd(ctx, grad):
    a, b, *index = ctx.saved_tensors
    rows, cols = ctx.rows, ctx.cols
    ga = gb = None
    grad = grad.contiguous()
    if ctx.needs_input_grad[0]:
        ga = _dsd_op(grad, *index, rows, cols, False, b.t())
    if ctx.needs_input_grad[1]:
        gb = _dds_op(a.t(), grad, *index, rows, cols, False, None)
    return (ga, gb) + (None,) * 9


_sdd_op.register_autograd(_backward_sdd, setup_context=_setup_sdd)


class _DdsFunction(torch.autograd.Function):
    """Eager autograd for dds: the same forward and backward as the custom op's registration above,
    without the custom-op dispatch, which cost ~100 µs of host time per call (H200 host, 2026-11-22:
    a BlockSparseLinear forward took 127-160 µs with parameters requiring grad vs 31 µs without,
    more than its kernel at low density). torch.compile keeps tracing the custom op (see dds())."""

    @staticmethod
    def forward(ctx, a, values, index, rows, cols, transpose, bias):
        out = _dds_impl(a, values, index, rows, cols, transpose, bias)
        ctx.save_for_backward(a, values, *index)
        ctx.meta = (rows, cols, transpose, bias is not None)
        return out

    @staticmethod
    def backward(ctx, grad):
        a, values, *index = ctx.saved_tensors
        rows, cols, transpose, has_bias = ctx.meta
        # create_graph=True (grad mode on here): the differentiable custom ops
        # (and the custom ops where compiled autograd traces this backward: native calls do not trace)
        ga, gv, gbias = _dds_grads(grad, a, values, index, rows, cols, transpose, ctx.needs_input_grad[0],
                                   ctx.needs_input_grad[1], has_bias and ctx.needs_input_grad[6],
                                   torch.is_grad_enabled() or traced())
        return ga, gv, None, None, None, None, gbias


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------
def _check_matrix(name: str, s) -> None:
    if not isinstance(s, BlockSparseMatrix):
        raise TypeError(f"`{name}` must be a sparsekern.BlockSparseMatrix; got {type(s).__name__}")


def dds(x: torch.Tensor, s: BlockSparseMatrix, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``x @ s (+ bias)`` with ``s`` block-sparse (possibly a ``.t()`` view): ``x`` is
    ``(..., k)``, the result ``(..., n)``. ``F.linear(x, W, b)`` is ``dds(x, W.t(), b)``."""
    _check_matrix("s", s)
    rows, cols = s._storage_shape
    return _dds_batched(x, s.values, s.index_sets(), rows, cols, s.transposed, bias)


def _dds_batched(x, values, index, rows, cols, transpose, bias):
    """dds on the operands of a BlockSparseMatrix (the six index sets as a tuple), ``x`` with any
    leading batch dims: the body of :func:`dds` and of ``BlockSparseLinear.forward`` (which calls
    it directly, without building a matrix view per call)."""
    _check_float("x", x)
    check_no_transform("bsr.dds", x, values, bias)
    x, values, bias = autocast_args(x, x, values, bias)  # under torch.autocast: in its dtype, as F.linear
    nd = x.dim()
    if nd == 2:
        a = x
    elif nd < 1:
        raise ValueError("`x` must have at least 1 dim")
    else:
        a = x.reshape(-1, x.shape[-1])
    if traced() or special(a, values, bias):  # (meta / fake: the op's fake implementation gives the result)
        out = _dds_op(a, values, *index, rows, cols, transpose, bias)
    elif torch.is_grad_enabled() and (a.requires_grad or values.requires_grad
                                      or (isinstance(bias, _Tensor) and bias.requires_grad)):
        out = _DdsFunction.apply(a, values, tuple(index), rows, cols, transpose, bias)
    else:
        out = _dds_impl(a, values, index, rows, cols, transpose, bias)
    return out if nd == 2 else out.reshape(*x.shape[:-1], out.shape[-1])


def dsd(s: BlockSparseMatrix, x: torch.Tensor) -> torch.Tensor:
    """``s @ x`` with ``s`` block-sparse (possibly a ``.t()`` view) and ``x`` a dense 2-D tensor."""
    _check_matrix("s", s)
    _check_float("x", x)
    check_no_transform("bsr.dsd", s.values, x)
    rows, cols = s._storage_shape
    index = s.index_sets()
    values, x = autocast_args(x, s.values, x)  # under torch.autocast: both in its dtype
    if needs_graph(values, x):
        return _dsd_op(values, *index, rows, cols, s.transposed, x)
    return _dsd_impl(values, index, rows, cols, s.transposed, x)


def sdd(a: torch.Tensor, b: torch.Tensor, pattern: BlockSparseMatrix) -> BlockSparseMatrix:
    """``(a @ b)`` computed only on the blocks of ``pattern``: a BlockSparseMatrix sharing the
    pattern's index sets (its values are differentiable in ``a`` and ``b``)."""
    _check_matrix("pattern", pattern)
    _check_float("a", a)
    _check_float("b", b)
    check_no_transform("bsr.sdd", a, b, pattern.values)
    if pattern.transposed:  # (a·b) on Pᵀ = ((bᵀ·aᵀ) on P)ᵀ
        return sdd(b.t(), a.t(), pattern.t()).t()
    rows, cols = pattern._storage_shape
    index = pattern.index_sets()
    like = pattern.values.detach()
    a, b, like = autocast_args(a, a, b, like)  # under torch.autocast: operands and result in its dtype
    if needs_graph(a, b, like):
        vals = _sdd_op(a, b, like, *index, rows, cols)
    else:
        vals = _sdd_impl(a, b, like, index, rows, cols)
    return pattern._like(vals)


# --------------------------------------------------------------------------------------------
# Pattern learning
# --------------------------------------------------------------------------------------------
@torch.no_grad()
def prune_and_regrow(matrix: BlockSparseMatrix, fraction: float, *, optimizer=None,
                     grow_scores: Optional[torch.Tensor] = None,
                     generator: Optional[torch.Generator] = None) -> dict:
    """Drops the ``fraction`` of blocks with the smallest Frobenius norm and grows as many new
    blocks elsewhere (density stays constant), in place.

    New blocks start at zero (the function computed by the matrix does not change at the step).
    Growth picks the positions that were empty before the step with the highest ``grow_scores``
    (a block_rows × block_cols tensor, e.g. the block norms of a dense gradient, as in RigL), or
    random ones; at most as many blocks move as there were empty positions.

    The values tensor and the index tensors are updated in place (same shapes, so optimizers and
    CUDA graphs holding them stay valid). With ``optimizer``, every state tensor of the values
    parameter shaped like it (Adam's ``exp_avg``/``exp_avg_sq``, SGD's ``momentum_buffer``, ...)
    is permuted with the surviving blocks and zeroed for the new ones; so is ``values.grad``.
    Returns ``{"pruned": k, "grown": k, "density": d}``.
    """
    if not isinstance(matrix, BlockSparseMatrix):
        raise TypeError(f"`matrix` must be a BlockSparseMatrix; got {type(matrix).__name__}")
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not (0.0 <= fraction <= 1.0):
        raise ValueError(f"`fraction` must be in [0, 1]; got {fraction!r}")
    vals = matrix.values
    b = matrix.block_size
    rows, cols = matrix._storage_shape
    rb, cb = rows // b, cols // b
    nnz = matrix.nnz_blocks
    free_before = rb * cb - nnz
    k = min(int(round(fraction * nnz)), free_before)  # growth needs positions that were empty
    if k <= 0:
        return {"pruned": 0, "grown": 0, "density": matrix.density}

    dev = vals.device
    norms = vals.detach().float().pow(2).sum(dim=(1, 2))
    drop = torch.topk(norms, k, largest=False).indices
    keep = torch.ones(nnz, dtype=torch.bool, device=dev)
    keep[drop] = False
    pos = matrix.block_row_indices.long() * cb + matrix.block_col_indices.long()

    was_occupied = torch.zeros(rb * cb, dtype=torch.bool, device=dev)
    was_occupied[pos] = True  # includes the blocks pruned now: they are not regrown
    if grow_scores is not None:
        # In the matrix's own orientation: a transposed view's scores are (its rows × its cols).
        shape = (cb, rb) if matrix.transposed else (rb, cb)
        if not isinstance(grow_scores, torch.Tensor) or grow_scores.shape != shape:
            got = tuple(grow_scores.shape) if isinstance(grow_scores, torch.Tensor) else type(grow_scores).__name__
            raise ValueError(f"`grow_scores` must be {shape} (block rows × block cols of the matrix); got {got}")
        score = grow_scores.detach()
        score = (score.t() if matrix.transposed else score).to(dev, torch.float32).flatten()
        # NaN ranks last (an overflowed norm, say, must not grow a block); ±inf keep their order.
        score = torch.nan_to_num(score, nan=-math.inf)
    else:
        score = torch.rand(rb * cb, generator=generator).to(dev)
    # Ranked among the free positions only (k ≤ their count): any score, infinite ones included,
    # can then never grow a block where one already is.
    free = torch.nonzero(~was_occupied).flatten()
    grow = free[torch.topk(score[free], k).indices]

    new_pos = torch.cat([pos[keep], grow])
    src = torch.cat([torch.nonzero(keep).flatten(), torch.full((k,), -1, dtype=torch.long, device=dev)])
    order = torch.argsort(new_pos)
    new_pos, src = new_pos[order], src[order]

    def permute(t: torch.Tensor) -> None:
        moved = t[src.clamp(min=0)]
        moved[src < 0] = 0
        t.copy_(moved)

    permute(vals.data if isinstance(vals, torch.nn.Parameter) else vals)
    if vals.grad is not None:
        permute(vals.grad)
    if optimizer is not None:
        state = optimizer.state.get(vals, {})
        for value in state.values():
            if isinstance(value, torch.Tensor) and value.shape == vals.shape:
                permute(value)

    new_rows = (new_pos // cb).to(torch.int32)
    new_cols = (new_pos % cb).to(torch.int32)
    offsets = torch.zeros(rb + 1, dtype=torch.int32, device=dev)
    offsets[1:] = torch.cumsum(torch.bincount(new_rows.long(), minlength=rb), 0).to(torch.int32)
    matrix.block_row_offsets.copy_(offsets)
    matrix.block_col_indices.copy_(new_cols)
    derived = _derive_index_sets(offsets, new_cols, rb, cb)
    for name, t in zip(_INDEX_NAMES[2:], derived):
        getattr(matrix, name).copy_(t)
    return {"pruned": k, "grown": k, "density": matrix.density}
