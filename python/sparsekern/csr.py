"""Unstructured sparse products: CSR × dense (``csr_matmul``), the sampled product that is its
gradient (``csr_sddmm``), and ``SparseLinear``, an ``nn.Linear`` with a CSR weight.

On CUDA every product runs through cuSPARSE's generic API with a cached *plan*: the descriptors,
the algorithm and the workspace size are made once per (pattern, shapes, strides, dtype, stream)
and the workspace is allocated once (with torch, so the caching allocator sees it), so repeated
calls make no cuSPARSE planning call and no allocation (see :func:`csr_plan_stats`). The first call
on a new pattern also checks its structure (sorted, in-range column indices; one host sync) and, on
CUDA, times cuSPARSE's CSR algorithms on it and keeps the fastest (``SPARSEKERN_CSR_AUTOTUNE=0``
turns that off); warm up before capturing a CUDA graph.

Patterns are recognised by their index tensors (data pointer and version counter), so a torch
``sparse_csr`` tensor whose values change (an optimizer step) keeps its plans, while an in-place
change of its indices makes a new pattern. The cache keeps the index tensors of the 64 most
recently used patterns alive; :func:`csr_clear_cache` drops it.
"""
from __future__ import annotations

import collections
import math
import numbers
import os
import threading
import weakref

import torch
from torch import nn

from . import _C
from ._core import (version_of, needs_graph, refuse_forward_ad, _capturing, _raw_stream, as_dlpack, autocast_args, autocast_dtype, check_backend, check_no_transform, check_tensor, dtype_name,
                    outside_graph_pools, stream_of)

__all__ = ["CSRMatrix", "csr_matmul", "csr_sddmm", "SparseLinear", "csr_plan_stats", "csr_clear_cache"]

INDEX_DTYPES = (torch.int32, torch.int64)
_INT32_MAX = 2**31 - 1


# --------------------------------------------------------------------------------------------
# Argument checks (shared by the real and fake implementations: no data is read)
# --------------------------------------------------------------------------------------------
def _check_pattern(crow, col, rows: int, cols: int) -> None:
    for name, t in (("crow_indices", crow), ("col_indices", col)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"`{name}` must be a torch.Tensor; got {type(t).__name__}")
        if t.dtype not in INDEX_DTYPES:
            raise TypeError(f"`{name}` must be int32 or int64; got {dtype_name(t.dtype)}")
        if t.dim() != 1:
            raise ValueError(f"`{name}` must be 1-D; got shape {tuple(t.shape)}")
    if col.dtype != crow.dtype:
        raise TypeError(f"`col_indices` must have the dtype of `crow_indices` ({dtype_name(crow.dtype)}); "
                        f"got {dtype_name(col.dtype)}")
    if rows < 0 or cols < 0:
        raise ValueError(f"the sparse shape must be non-negative; got ({rows}, {cols})")
    if crow.numel() != rows + 1:
        raise ValueError(f"`crow_indices` must have rows + 1 = {rows + 1} entries; got {crow.numel()}")
    if col.device != crow.device:
        raise ValueError(f"`col_indices` must be on the device of `crow_indices` ({crow.device}); got {col.device}")
    if crow.dtype == torch.int32 and (col.numel() > _INT32_MAX or cols > _INT32_MAX):
        raise ValueError("int32 `col_indices` cannot address this matrix; use int64 indices")


def _check_values(values, col) -> None:
    check_tensor("values", values)
    if values.dim() != 1:
        raise ValueError(f"`values` must be 1-D; got shape {tuple(values.shape)}")
    if values.numel() != col.numel():
        raise ValueError(f"`values` must have one entry per column index ({col.numel()}); got {values.numel()}")
    if values.device != col.device:
        raise ValueError(f"`values` must be on the device of `col_indices` ({col.device}); got {values.device}")
    check_backend("values", values)


def _check_dense(name: str, t, ref: torch.Tensor, ref_name: str) -> None:
    check_tensor(name, t, min_dim=2)
    if t.dim() > 3:
        raise ValueError(f"`{name}` must be 2-D or 3-D (batch, rows, cols); got {t.dim()}-D")
    if t.device != ref.device:
        raise ValueError(f"`{name}` must be on the device of `{ref_name}` ({ref.device}); got {t.device}")
    if t.dtype != ref.dtype:
        raise TypeError(f"`{name}` must have the dtype of `{ref_name}` ({dtype_name(ref.dtype)}); "
                        f"got {dtype_name(t.dtype)}")
    check_backend(name, t)


def _check_mm(crow, col, values, rows, cols, b, transpose_a):
    """Shapes of op(A)·B: returns (m, n, batch_shape)."""
    _check_pattern(crow, col, rows, cols)
    _check_values(values, col)
    _check_dense("b", b, values, "a")
    m, k = (cols, rows) if transpose_a else (rows, cols)
    if b.shape[-2] != k:
        what = "the rows of `a`, transposed" if transpose_a else "the columns of `a`"
        raise ValueError(f"`b` must have {k} rows ({what}: `a` is {rows}x{cols}) to chain; "
                         f"got shape {tuple(b.shape)}")
    return m, b.shape[-1], b.shape[:-2]


def _check_sddmm(crow, col, rows, cols, x, y):
    _check_pattern(crow, col, rows, cols)
    check_tensor("x", x, min_dim=2)
    if x.device != crow.device:
        raise ValueError(f"`x` must be on the device of the pattern ({crow.device}); got {x.device}")
    _check_dense("x", x, x, "x")
    _check_dense("y", y, x, "x")
    if x.dim() != y.dim() or x.shape[:-2] != y.shape[:-2]:
        raise ValueError(f"`x` and `y` must have the same batch dims; got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.shape[-2] != rows:
        raise ValueError(f"`x` must have {rows} rows (the rows of `pattern`); got shape {tuple(x.shape)}")
    if y.shape[-1] != cols:
        raise ValueError(f"`y` must have {cols} columns (the columns of `pattern`); got shape {tuple(y.shape)}")
    if y.shape[-2] != x.shape[-1]:
        raise ValueError(f"`y` must have {x.shape[-1]} rows (the columns of `x`) to chain; got shape {tuple(y.shape)}")


# --------------------------------------------------------------------------------------------
# Pattern registry: structure check once per pattern, plans and workspaces per pattern
# --------------------------------------------------------------------------------------------
# Patterns whose structure was checked, with their index copies, plans and workspaces. Two ways to
# find one:
#   - by the identity of the index tensors it was seen with (_patterns): an entry dies with those
#     tensors (a weakref.finalize on each), so a model's live patterns are never evicted and dead
#     ones pin nothing (before session 28 only a 64-entry LRU held them: a model with more than 32
#     trained SparseLinear layers, two patterns each with the transpose its backward builds,
#     re-checked every pattern with host syncs on every step and could not be captured in a CUDA
#     graph);
#   - by data pointers, versions and shape (_recent, an LRU of _MAX_RECENT holding the tensors, so
#     the pointers cannot be reused), for index tensors that are new objects at every call over the
#     same memory (a torch.sparse_csr tensor's crow_indices() and col_indices() are).
# Both record the pointers and versions: an in-place change of the indices makes a new pattern.
_MAX_RECENT = 64
_lock = threading.Lock()
_patterns: dict = {}  # (id(crow), id(col)) -> (key, _Pattern)
_recent: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()  # key -> (crow, col, _Pattern)
# Patterns (with their index copies, plans and workspaces) that a CUDA-graph capture used, by id:
# kept alive past their tensors' death or csr_clear_cache(), since the graph reads them at every
# replay and torch's graphs keep no input alive. release_graph_buffers() lets go of them.
_graph_held: dict = {}
_stats = collections.Counter()


def _autotune_enabled() -> bool:
    return os.environ.get("SPARSEKERN_CSR_AUTOTUNE", "1") not in ("0", "false", "False", "")


class _PlanCache(collections.OrderedDict):
    """A pattern's plans by problem (op, dtype, shapes, strides, stream), least recently used first,
    at most _MAX_PLANS of them: one per batch size had no bound (a layer fed 8000 batch sizes kept
    24,000 plans). A plan that a CUDA-graph capture used stays (pinned): the graph reads its
    workspace."""

    __slots__ = ("pinned",)

    def __init__(self):
        super().__init__()
        self.pinned: set = set()

    def lookup(self, key):
        entry = self.get(key)
        if entry is not None:
            self.move_to_end(key)
            if _capturing():
                self.pinned.add(key)
        return entry

    def put(self, key, entry) -> None:
        self[key] = entry
        if _capturing():
            self.pinned.add(key)
        if len(self) > _MAX_PLANS:
            for k in [k for k in self if k not in self.pinned][:len(self) - _MAX_PLANS]:
                del self[k]


_MAX_PLANS = 64


class _Pattern:
    """A validated sparsity pattern: the int32 copies cuSPARSE gets, the transposed pattern and the
    plans made for it. It holds no reference to the index tensors it was made from (the cache entry
    dies with them, see _pattern); the methods take them."""

    __slots__ = ("rows", "cols", "plans", "_device_indices", "_transposed", "_made_on", "__weakref__")

    def __init__(self, rows, cols):
        self.rows, self.cols = rows, cols
        self.plans = _PlanCache()
        self._device_indices = None
        self._transposed = None
        # {id(cached tuple): (raw stream, event, streams seen)}: where each cached tuple was made
        self._made_on: dict = {}

    def _keep(self, made, device):
        """Caches `made` (a tuple of CUDA tensors just queued on the current stream): records an
        event after them, so that a later call on another stream waits for them (_ordered)."""
        ev = torch.cuda.Event()
        ev.record(torch.cuda.current_stream(device))
        self._made_on[id(made)] = (_raw_stream(device.index), ev, set())
        return made

    def _ordered(self, cached, device):
        """`cached`, safe to use on the current stream: the tensors were made by kernels queued on
        the stream current at the first call; a call on another stream (a side stream, a second
        autograd stream) makes that stream wait for them (no host sync) and tells torch's
        allocator it uses them (record_stream), once per stream. Not during a capture (torch's
        graph capture synchronises the device before it starts)."""
        made = self._made_on.get(id(cached))
        if made is None or _capturing():
            return cached
        raw = _raw_stream(device.index)
        if raw == made[0] or raw in made[2]:
            return cached
        cur = torch.cuda.current_stream(device)
        cur.wait_event(made[1])
        for t in cached:
            t.record_stream(cur)
        made[2].add(raw)
        return cached

    def transposed(self, crow, col):
        """(crow, col, perm) of Aᵀ in CSR (made once, on the pattern's device): values of Aᵀ are
        values[perm]. Stable sort by column keeps rows sorted within each column of A."""
        if self._transposed is None:
            crow, col = self.indices(crow, col)

            def make():
                nnz = col.numel()
                c, j = crow.long(), col.long()
                row_of = torch.repeat_interleave(torch.arange(self.rows, device=c.device), c.diff(), output_size=nnz)
                perm = torch.sort(j, stable=True).indices
                crow_t = torch.zeros(self.cols + 1, dtype=torch.int64, device=c.device)
                crow_t[1:] = torch.cumsum(torch.bincount(j, minlength=self.cols), 0)
                return crow_t.to(crow.dtype), row_of[perm].to(crow.dtype).contiguous(), perm

            made = outside_graph_pools(crow.device, make)
            if _capturing():  # made in the graph's pool: used by this capture, kept by no cache
                return made
            self._transposed = self._keep(made, crow.device) if crow.device.type == "cuda" else made
            return self._transposed
        return self._ordered(self._transposed, crow.device) if crow.device.type == "cuda" else self._transposed

    def indices(self, crow, col):
        """Index tensors for the backend. On CUDA, int64 patterns that fit get int32 copies
        (made once): half the index traffic, and cuSPARSE's 32-bit kernels are its tuned ones."""
        if crow.device.type != "cuda" or crow.dtype == torch.int32:
            return crow, col
        if col.numel() > _INT32_MAX or self.cols > _INT32_MAX:
            return crow, col
        if self._device_indices is None:
            made = outside_graph_pools(crow.device, lambda: (crow.to(torch.int32), col.to(torch.int32)))
            if _capturing():  # as in transposed()
                return made
            self._device_indices = self._keep(made, crow.device)
            return self._device_indices
        return self._ordered(self._device_indices, crow.device)


def _raise_structure(crow, col, rows, cols) -> None:
    """Find the first structural problem (host copies; error path only) and raise naming it."""
    c = crow.to(device="cpu", dtype=torch.int64)
    j = col.to(device="cpu", dtype=torch.int64)
    nnz = j.numel()
    if c[0] != 0:
        raise ValueError(f"`crow_indices` must start at 0; got {int(c[0])}")
    if c[-1] != nnz:
        raise ValueError(f"`crow_indices` must end at nnz = {nnz}; got {int(c[-1])}")
    bad = torch.nonzero(c[1:] < c[:-1])
    if bad.numel():
        i = int(bad[0])
        raise ValueError(f"`crow_indices` must be non-decreasing; got {int(c[i])} then {int(c[i + 1])} at row {i}")
    bad = torch.nonzero((j < 0) | (j >= cols))
    if bad.numel():
        e = int(bad[0])
        row = int(torch.searchsorted(c, e, right=True)) - 1
        raise ValueError(f"`col_indices` must be in [0, {cols}); got {int(j[e])} at position {e} (row {row})")
    for i in range(rows):
        seg = j[c[i]:c[i + 1]]
        bad = torch.nonzero(seg[1:] <= seg[:-1])
        if bad.numel():
            q = int(bad[0])
            raise ValueError(f"`col_indices` must be sorted and unique within each row; row {i} has "
                             f"{int(seg[q + 1])} after {int(seg[q])} at position {int(c[i]) + q + 1}")
    raise AssertionError("structure check failed but no problem was found")  # pragma: no cover


def _validate_structure(crow, col, rows, cols) -> None:
    """Checks the CSR structure on the pattern's device with two host syncs; raises ValueError
    naming `crow_indices` or `col_indices` (the CPU kernels re-check on every call in C++)."""
    nnz = col.numel()
    c = crow.to(torch.int64)
    j = col.to(torch.int64)
    checks = [c[0] == 0, c[-1] == nnz, (c[1:] >= c[:-1]).all()]
    if nnz:
        checks.append(((j >= 0) & (j < cols)).all())
    if not bool(torch.stack(checks).all()):
        _raise_structure(crow, col, rows, cols)
    if nnz > 1:
        # Positions that start a row (offsets are valid now, so they index [0, nnz]).
        starts = torch.zeros(nnz + 1, dtype=torch.bool, device=c.device)
        starts[c[:-1]] = True
        if not bool(((j[1:] > j[:-1]) | starts[1:nnz]).all()):
            _raise_structure(crow, col, rows, cols)


def _drop_pattern(ident) -> None:
    _patterns.pop(ident, None)  # no lock: a finalizer may run inside a locked block of this thread


def _pattern(crow, col, rows: int, cols: int, *, trusted: bool = False) -> _Pattern:
    ident = (id(crow), id(col))
    key = (crow.device, crow.dtype, crow.data_ptr(), col.data_ptr(), version_of(crow), version_of(col),
           rows, cols, col.numel())
    capturing = crow.device.type == "cuda" and _capturing()
    entry = _patterns.get(ident)
    if entry is not None and entry[0] == key:
        p = entry[1]
    else:
        with _lock:
            recent = _recent.get(key)
            if recent is not None:
                _recent.move_to_end(key)
        if recent is not None:
            p = recent[2]
        elif capturing:
            if not trusted:
                # The structure check synchronises, which a capture forbids (the capture would
                # fail with an error that names nothing); warm-up calls cache the pattern first.
                raise RuntimeError("sparsekern.csr: a CSR pattern first seen during a CUDA-graph capture; its "
                                   "structure check synchronises with the GPU, so run the product once "
                                   "before capturing it (as torch.cuda.graph's warm-up does)")
            return _Pattern(rows, cols)  # made from the graph's tensors: kept by no cache
        else:
            if not trusted:  # trusted: built by this module (a transpose), valid by construction
                _validate_structure(crow, col, rows, cols)
            p = _Pattern(rows, cols)
            _stats["patterns_validated"] += 1
            with _lock:
                _recent[key] = (crow, col, p)
                while len(_recent) > _MAX_RECENT:
                    _recent.popitem(last=False)
        fresh = ident not in _patterns
        _patterns[ident] = (key, p)
        if fresh:
            weakref.finalize(crow, _drop_pattern, ident)
            weakref.finalize(col, _drop_pattern, ident)
    if capturing:
        with _lock:
            _graph_held[id(p)] = p
    return p


def _workspace(nbytes: int, device: torch.device):
    if nbytes == 0:
        return None
    _stats["workspace_allocations"] += 1
    return outside_graph_pools(device, lambda: torch.empty(nbytes, dtype=torch.uint8, device=device))


def csr_plan_stats() -> dict:
    """Planning work done so far (process-wide): a warm call adds only to ``runs`` and
    ``plan_cache_hits``. Keys: ``plans_created``, ``buffer_size_queries``, ``preprocess_calls``,
    ``runs`` (from the C++ plans), ``patterns_validated``, ``plan_cache_hits``,
    ``workspace_allocations``, ``autotuned`` (from this module's cache)."""
    out = dict(_C.csr_plan_counters())
    for k in ("patterns_validated", "plan_cache_hits", "workspace_allocations", "autotuned"):
        out[k] = _stats[k]
    return out


def csr_clear_cache() -> None:
    """Drop every cached pattern, plan and workspace (those a CUDA-graph capture used stay alive
    until release_graph_buffers())."""
    _patterns.clear()
    with _lock:
        _recent.clear()


def release_graph_buffers() -> None:
    """Lets go of the patterns, plans and workspaces that CUDA-graph captures used (kept alive for
    their replays: torch's graphs do not keep their inputs alive). Call it after deleting those
    graphs; replaying a graph captured before the call is then undefined."""
    with _lock:
        _graph_held.clear()


def _dense_ready(t: torch.Tensor) -> torch.Tensor:
    """cuSPARSE wants each dense operand row- or column-major (a unit stride along one matrix dim)
    and 16-byte aligned: copy only the views that are neither (the CPU takes any strides)."""
    if t.device.type != "cuda":
        return t
    rows, cols = t.shape[-2], t.shape[-1]
    rs, cs = t.stride(-2), t.stride(-1)
    row_major = (cs == 1 or cols <= 1) and (rs >= max(cols, 1) or rows <= 1)
    col_major = (rs == 1 or rows <= 1) and (cs >= max(rows, 1) or cols <= 1)
    if not (row_major or col_major) or t.data_ptr() % 16:
        return t.contiguous()
    return t


def _vector_ready(t: torch.Tensor) -> torch.Tensor:
    t = t.contiguous()
    if t.device.type == "cuda" and t.data_ptr() % 16:
        t = t.clone()
    return t


# CsrSpmmPlan.algorithm's names → its constructor's algorithm numbers (csr::SpmmAlgorithm).
_SPMM_ALGORITHMS = {"default": 0, "csr_alg1": 1, "csr_alg2": 2, "csr_alg3": 3}


def _time_plan(run, device) -> float:
    """Median of 3 event-timed runs after one warm-up (autotuning only)."""
    run()
    times = []
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        times.append((start, end))
    torch.cuda.synchronize(device)
    return sorted(s.elapsed_time(e) for s, e in times)[1]


# Aᵀ·B on CUDA multiplies by an explicit transpose of A (its indices built once per pattern,
# the values gathered per call) instead of cuSPARSE's opA = T: the transposed-A algorithms
# accumulate with atomics (slower, and not deterministic) and take fewer layouts. The C++ CPU
# kernel transposes itself. Tests set this to True to run the gather path on the CPU.
_EXPLICIT_TRANSPOSE_ON_CPU = False


def _spmm_into(crow, col, values, rows, cols, b, out, transpose_a: bool, *, trusted: bool = False) -> None:
    """out ← op(A)·b (2-D or 3-D b/out) through the cached plan of this pattern and shape."""
    pattern = _pattern(crow, col, rows, cols, trusted=trusted)
    if out.numel() == 0:
        return
    values = _vector_ready(values)
    if transpose_a and (values.device.type == "cuda" or _EXPLICIT_TRANSPOSE_ON_CPU):
        crow_t, col_t, perm = pattern.transposed(crow, col)
        _spmm_into(crow_t, col_t, values.index_select(0, perm), cols, rows, b, out, False, trusted=True)
        return
    ci, cj = pattern.indices(crow, col)
    stream = stream_of(values)
    key = ("mm", values.dtype, transpose_a, tuple(b.shape), b.stride(), tuple(out.shape), out.stride(), stream)

    def args():  # fresh capsules per call: a DLPack capsule can be consumed only once
        return (as_dlpack(ci), as_dlpack(cj), as_dlpack(values), rows, cols, as_dlpack(b), as_dlpack(out),
                transpose_a)

    entry = pattern.plans.lookup(key)
    if entry is None and values.device.type == "cuda" and _capturing():
        # A capture on a stream without a plan of its own (plans are per stream for their
        # workspaces; torch.cuda.graph warms up on one stream and captures on another): the
        # algorithm timed for this problem on another stream, untimed here (timing synchronises,
        # which a capture forbids), its workspace in the graph's pool and kept by no cache.
        name = next((e[0].algorithm for k, e in reversed(pattern.plans.items()) if k[:-1] == key[:-1]), "default")
        plan = _C.CsrSpmmPlan(*args(), _SPMM_ALGORITHMS.get(name, 0))
        plan.run(*args(), 1.0, 0.0, *_ws_arg(_workspace(plan.workspace_size, values.device)), stream)
        return
    if entry is None:
        entry = _make_spmm_plan(args, values.device, stream)
        pattern.plans.put(key, entry)
    else:
        _stats["plan_cache_hits"] += 1
    plan, ws = entry
    plan.run(*args(), 1.0, 0.0, *_ws_arg(ws), stream)


def _ws_arg(ws):
    """(pointer, bytes) of a workspace tensor, (0, 0) for none."""
    return (ws.data_ptr(), ws.numel()) if ws is not None else (0, 0)


def _make_spmm_plan(args, device, stream):
    plan = _C.CsrSpmmPlan(*args(), 0)
    entry = (plan, _workspace(plan.workspace_size, device))
    if device.type != "cuda" or not _autotune_enabled():
        return entry
    # Time each CSR algorithm cuSPARSE accepts for this problem and keep the fastest: which one
    # wins depends on the density, the row-length spread and n (ALG2 is not always best).
    candidates = [entry]
    for algorithm in (1, 2, 3):
        try:
            other = _C.CsrSpmmPlan(*args(), algorithm)
        except (RuntimeError, ValueError, TypeError):
            continue
        if other.algorithm == plan.algorithm:
            continue
        candidates.append((other, _workspace(other.workspace_size, device)))
    if len(candidates) == 1:
        return entry
    best, best_ms = entry, math.inf
    for cand in candidates:
        p, ws = cand
        try:
            ms = _time_plan(lambda: p.run(*args(), 1.0, 0.0, *_ws_arg(ws), stream), device)
        except RuntimeError:
            continue
        if ms < best_ms:
            best, best_ms = cand, ms
    _stats["autotuned"] += 1
    return best


def _sddmm_into(crow, col, rows, cols, x, y, out_values) -> None:
    """out_values ← Σ_b (x_b·y_b) sampled at the pattern, through the cached plan."""
    pattern = _pattern(crow, col, rows, cols)
    if out_values.numel() == 0:
        return
    ci, cj = pattern.indices(crow, col)
    stream = stream_of(out_values)
    key = ("sddmm", out_values.dtype, tuple(x.shape), x.stride(), tuple(y.shape), y.stride(), stream)
    entry = pattern.plans.lookup(key)
    if entry is None:
        try:
            plan = _C.CsrSddmmPlan(as_dlpack(ci), as_dlpack(cj), rows, cols, as_dlpack(x), as_dlpack(y),
                                   as_dlpack(out_values))
            entry = (plan, _workspace(plan.workspace_size, out_values.device))
        except RuntimeError as e:
            if "not supported by cuSPARSE" not in str(e):
                raise
            # Fallbacks, each planned once: row-major copies of the operands (some cuSPARSE
            # versions take fewer layout combinations), then fp32 for the half types (some
            # versions have no half-precision SDDMM).
            if not (x.is_contiguous() and y.is_contiguous()):
                entry = ("contiguous", None)
            elif out_values.dtype in (torch.float16, torch.bfloat16):
                entry = ("fp32", None)
            else:
                raise
        if not _capturing():  # a capture's workspace is in the graph's pool: kept by no cache
            pattern.plans.put(key, entry)
    else:
        _stats["plan_cache_hits"] += 1
    plan, ws = entry
    if isinstance(plan, str) and plan == "contiguous":
        _sddmm_into(crow, col, rows, cols, x.contiguous(), y.contiguous(), out_values)
        return
    if isinstance(plan, str):  # "fp32"
        out32 = torch.empty(out_values.shape, dtype=torch.float32, device=out_values.device)
        _sddmm_into(crow, col, rows, cols, x.float(), y.float(), out32)
        out_values.copy_(out32)
        return
    plan.run(as_dlpack(ci), as_dlpack(cj), rows, cols, as_dlpack(x), as_dlpack(y), as_dlpack(out_values),
             1.0, 0.0, *_ws_arg(ws), stream)


# --------------------------------------------------------------------------------------------
# Custom ops
# --------------------------------------------------------------------------------------------
def _csr_mm_impl(crow, col, values, rows, cols, b, transpose_a, transpose_out):
    m, n, batch = _check_mm(crow, col, values, rows, cols, b, transpose_a)
    if transpose_out:
        result = torch.empty((*batch, n, m), dtype=values.dtype, device=values.device)
        out = result.mT  # op(A)·B written column-major: its transpose comes out contiguous
    else:
        result = out = torch.empty((*batch, m, n), dtype=values.dtype, device=values.device)
    if result.numel():
        _spmm_into(crow.contiguous(), col.contiguous(), values, rows, cols, _dense_ready(b), out, transpose_a)
    else:
        _pattern(crow.contiguous(), col.contiguous(), rows, cols)  # still reject a bad structure
    return result


@torch.library.custom_op("sparsekern::csr_mm", mutates_args=())
def _csr_mm_op(crow_indices: torch.Tensor, col_indices: torch.Tensor, values: torch.Tensor, rows: int,
               cols: int, b: torch.Tensor, transpose_a: bool, transpose_out: bool) -> torch.Tensor:
    """op(A)·B (or its transpose, contiguous, with transpose_out), A = CSR(crow, col, values)."""
    refuse_forward_ad("csr_mm")
    return _csr_mm_impl(crow_indices, col_indices, values, rows, cols, b, transpose_a, transpose_out)


@_csr_mm_op.register_fake
def _(crow_indices, col_indices, values, rows, cols, b, transpose_a, transpose_out):
    m, n, batch = _check_mm(crow_indices, col_indices, values, rows, cols, b, transpose_a)
    return values.new_empty((*batch, n, m) if transpose_out else (*batch, m, n))


def _csr_mm_setup(ctx, inputs, output):
    crow, col, values, rows, cols, b, transpose_a, transpose_out = inputs
    ctx.save_for_backward(crow, col, values, b)
    ctx.shape = (rows, cols)
    ctx.transpose_a, ctx.transpose_out = transpose_a, transpose_out


def _csr_mm_backward(ctx, grad):
    crow, col, values, b = ctx.saved_tensors
    rows, cols = ctx.shape
    g = grad.mT if ctx.transpose_out else grad  # gradient of P = op(A)·B
    g_values = g_b = None
    if ctx.needs_input_grad[2]:
        # dA = dP·Bᵀ sampled at A's pattern (A·B), or B·dPᵀ (Aᵀ·B); summed over the batch.
        x, y = (b, g.mT) if ctx.transpose_a else (g, b.mT)
        g_values = _csr_sddmm_op(crow, col, rows, cols, x, y)
    if ctx.needs_input_grad[5]:
        # dB = op(A)ᵀ·dP, written in b's memory order so that a column-major b (SparseLinear's
        # xᵀ) gets a gradient the autograd engine hands back to x without a copy.
        col_major = b.stride(-2) == 1 and b.stride(-1) != 1
        g_b = _csr_mm_op(crow, col, values, rows, cols, g, not ctx.transpose_a, col_major)
        if col_major:
            g_b = g_b.mT
    return None, None, g_values, None, None, g_b, None, None


_csr_mm_op.register_autograd(_csr_mm_backward, setup_context=_csr_mm_setup)


def _csr_sddmm_impl(crow, col, rows, cols, x, y):
    _check_sddmm(crow, col, rows, cols, x, y)
    crow, col = crow.contiguous(), col.contiguous()
    out = torch.empty(col.numel(), dtype=x.dtype, device=x.device)
    _sddmm_into(crow, col, rows, cols, _dense_ready(x), _dense_ready(y), out)
    if out.numel() == 0:
        _pattern(crow, col, rows, cols)
    return out


@torch.library.custom_op("sparsekern::csr_sddmm", mutates_args=())
def _csr_sddmm_op(crow_indices: torch.Tensor, col_indices: torch.Tensor, rows: int, cols: int,
                  x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """values[e] = Σ_b (x_b·y_b)[i, j] for the stored entries e = (i, j) of the pattern."""
    refuse_forward_ad("csr_sddmm")
    return _csr_sddmm_impl(crow_indices, col_indices, rows, cols, x, y)


@_csr_sddmm_op.register_fake
def _(crow_indices, col_indices, rows, cols, x, y):
    _check_sddmm(crow_indices, col_indices, rows, cols, x, y)
    return x.new_empty((col_indices.numel(),))


def _csr_sddmm_setup(ctx, inputs, output):
    crow, col, rows, cols, x, y = inputs
    ctx.save_for_backward(crow, col, x, y)
    ctx.shape = (rows, cols)


def _csr_sddmm_backward(ctx, grad):
    crow, col, x, y = ctx.saved_tensors
    rows, cols = ctx.shape
    g = grad.contiguous()
    g_x = g_y = None
    if ctx.needs_input_grad[4]:
        g_x = _csr_mm_op(crow, col, g, rows, cols, y.mT, False, False)  # G·yᵀ
    if ctx.needs_input_grad[5]:
        g_y = _csr_mm_op(crow, col, g, rows, cols, x, True, True)  # (Gᵀ·x)ᵀ = xᵀ·G
    return None, None, None, None, g_x, g_y


_csr_sddmm_op.register_autograd(_csr_sddmm_backward, setup_context=_csr_sddmm_setup)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------
class CSRMatrix:
    """A 2-D sparse matrix in CSR form for sparsekern ops: torch's (crow_indices, col_indices,
    values) triple and a shape. Indices are int32 or int64 (both the same); column indices must be
    sorted and unique within each row. The structure is checked on construction (one host sync on
    CUDA; ``validate=False`` defers it to the first product). ``values`` may require grad.
    """

    __slots__ = ("crow_indices", "col_indices", "values", "shape")

    def __init__(self, crow_indices, col_indices, values, shape, *, validate: bool = True):
        if len(shape) != 2:
            raise ValueError(f"`shape` must be (rows, cols); got {tuple(shape)}")
        rows, cols = int(shape[0]), int(shape[1])
        _check_pattern(crow_indices, col_indices, rows, cols)
        _check_values(values, col_indices)
        # Contiguous indices once here: the plan cache recognises a pattern by its index tensors,
        # and a per-call .contiguous() copy of a strided view would be a new pattern every call.
        self.crow_indices, self.col_indices = crow_indices.contiguous(), col_indices.contiguous()
        self.values = values
        self.shape = torch.Size((rows, cols))
        if validate:
            _pattern(self.crow_indices, self.col_indices, rows, cols)

    @classmethod
    def from_dense(cls, dense: torch.Tensor, *, index_dtype: torch.dtype = torch.int64) -> "CSRMatrix":
        """The non-zeros of a 2-D dense tensor."""
        check_tensor("dense", dense)
        if dense.dim() != 2:
            raise ValueError(f"`dense` must be 2-D; got {dense.dim()}-D")
        return _from_mask(dense, dense != 0, index_dtype)

    @classmethod
    def from_torch(cls, t: torch.Tensor) -> "CSRMatrix":
        """Wraps a 2-D torch ``sparse_csr`` tensor (sharing its index and value tensors)."""
        crow, col, values, rows, cols = _components(t, "t")
        return cls(crow, col, values, (rows, cols))

    def to_torch(self) -> torch.Tensor:
        """A torch ``sparse_csr`` tensor sharing these tensors (differentiable in ``values``)."""
        return torch.sparse_csr_tensor(self.crow_indices, self.col_indices, self.values, self.shape,
                                       check_invariants=False)

    def to_dense(self) -> torch.Tensor:
        return self.to_torch().to_dense()

    def with_values(self, values: torch.Tensor) -> "CSRMatrix":
        """The same pattern with other values (no structure check)."""
        return CSRMatrix(self.crow_indices, self.col_indices, values, self.shape, validate=False)

    @property
    def nnz(self) -> int:
        return self.col_indices.numel()

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    @property
    def device(self) -> torch.device:
        return self.values.device

    @property
    def density(self) -> float:
        n = self.shape[0] * self.shape[1]
        return self.nnz / n if n else 0.0

    def __matmul__(self, other):
        return csr_matmul(self, other)

    def __repr__(self) -> str:
        return (f"CSRMatrix(shape={tuple(self.shape)}, nnz={self.nnz}, dtype={dtype_name(self.dtype)}, "
                f"index_dtype={dtype_name(self.crow_indices.dtype)}, device={self.device})")


def _from_mask(dense: torch.Tensor, mask: torch.Tensor, index_dtype: torch.dtype) -> CSRMatrix:
    if index_dtype not in INDEX_DTYPES:
        raise TypeError(f"`index_dtype` must be torch.int32 or torch.int64; got {index_dtype}")
    rows, cols = dense.shape
    idx = mask.nonzero()  # row-major order: sorted columns within each row
    counts = torch.bincount(idx[:, 0], minlength=rows) if idx.numel() else torch.zeros(
        rows, dtype=torch.int64, device=dense.device)
    crow = torch.zeros(rows + 1, dtype=torch.int64, device=dense.device)
    crow[1:] = torch.cumsum(counts, 0)
    return CSRMatrix(crow.to(index_dtype), idx[:, 1].to(index_dtype).contiguous(),
                     dense[mask].contiguous(), (rows, cols), validate=False)


def _components(a, name: str):
    """(crow, col, values, rows, cols) of a CSRMatrix or a 2-D torch sparse_csr tensor."""
    if isinstance(a, CSRMatrix):
        return a.crow_indices, a.col_indices, a.values, a.shape[0], a.shape[1]
    if isinstance(a, torch.Tensor):
        if a.layout != torch.sparse_csr:
            raise ValueError(f"`{name}` must be a sparse CSR matrix (a torch.sparse_csr tensor or a "
                             f"sparsekern.CSRMatrix); got layout {a.layout}")
        if a.dim() != 2 or a.values().dim() != 1:
            raise ValueError(f"`{name}` must be a 2-D CSR matrix without batch or dense dims; got shape "
                             f"{tuple(a.shape)}")
        return a.crow_indices(), a.col_indices(), a.values(), a.shape[0], a.shape[1]
    raise TypeError(f"`{name}` must be a torch.sparse_csr tensor or a sparsekern.CSRMatrix; got {type(a).__name__}")


def csr_matmul(a, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` with ``a`` a sparse CSR matrix (m×k; a ``torch.sparse_csr`` tensor or a
    :class:`CSRMatrix`) and ``b`` dense: (k, n) or a batch (..., k, n) sharing ``a``.

    fp64, fp32, fp16 and bf16 (fp32 accumulation); CPU or CUDA (cuSPARSE, on torch's current
    stream, planned once per pattern and shape). Differentiable in ``a``'s values and in ``b``.
    """
    check_no_transform("csr_matmul", b, *(a.values,) if isinstance(a, CSRMatrix) else ())
    crow, col, values, rows, cols = _components(a, "a")
    check_tensor("b", b, min_dim=2)
    values, b = autocast_args(b, values, b)  # under torch.autocast: both in its dtype, as torch.matmul
    batch = b.shape[:-2]
    b3 = b.reshape(-1, *b.shape[-2:]) if b.dim() > 3 else b
    if needs_graph(values, b):
        out = _csr_mm_op(crow, col, values, rows, cols, b3, False, False)
    else:
        out = _csr_mm_impl(crow, col, values, rows, cols, b3, False, False)
    return out.reshape(*batch, rows, b.shape[-1]) if b.dim() > 3 else out


def csr_sddmm(x: torch.Tensor, y: torch.Tensor, pattern):
    """The product ``x @ y`` sampled at the stored entries of ``pattern`` (SDDMM): a CSR matrix with
    ``pattern``'s structure (same type: ``torch.sparse_csr`` or :class:`CSRMatrix`) whose value
    at (i, j) is ``(x @ y)[i, j]``. ``x`` is m×t and ``y`` t×n, dense, for an m×n pattern; the
    pattern's values are ignored. With ``x = dY`` and ``y = Bᵀ`` it is the gradient of
    ``csr_matmul(A, B)`` with respect to A's values. Differentiable in ``x`` and ``y``.
    """
    crow, col, _, rows, cols = _components(pattern, "pattern")
    check_tensor("x", x, min_dim=2)
    check_tensor("y", y, min_dim=2)
    if x.dim() != 2 or y.dim() != 2:
        raise ValueError(f"`x` and `y` must be 2-D; got {tuple(x.shape)} and {tuple(y.shape)}")
    check_no_transform("csr_sddmm", x, y)
    x, y = autocast_args(x, x, y)  # under torch.autocast: both in its dtype
    if needs_graph(x, y):
        values = _csr_sddmm_op(crow, col, rows, cols, x, y)
    else:
        values = _csr_sddmm_impl(crow, col, rows, cols, x, y)
    if isinstance(pattern, CSRMatrix):
        return CSRMatrix(crow, col, values, (rows, cols), validate=False)
    return torch.sparse_csr_tensor(crow, col, values, (rows, cols), check_invariants=False)


# --------------------------------------------------------------------------------------------
# SparseLinear
# --------------------------------------------------------------------------------------------
class SparseLinear(nn.Module):
    """``nn.Linear`` with an unstructured sparse weight: ``y = x · Wᵀ + bias``, W stored as CSR
    (``crow_indices``/``col_indices`` buffers, ``values`` parameter). Gradients reach the input,
    the stored weight values (the pattern is fixed) and the bias.

    ``SparseLinear(in_features, out_features, bias=True, density=0.1)`` initialises like
    ``nn.Linear`` and keeps the largest-magnitude ``density`` fraction of the weight;
    ``SparseLinear.from_dense(linear, density)`` does the same to an existing ``nn.Linear``.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, density: float = 0.1,
                 device=None, dtype=None):
        super().__init__()
        dense = nn.Linear(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self._init_from(dense.weight.detach(), dense.bias.detach() if bias else None, density)

    @classmethod
    def from_dense(cls, linear: nn.Linear, density: float) -> "SparseLinear":
        """The ``nn.Linear`` pruned by magnitude to ``density`` (a fraction in (0, 1])."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"`linear` must be an nn.Linear; got {type(linear).__name__}")
        self = cls.__new__(cls)
        nn.Module.__init__(self)
        self._init_from(linear.weight.detach(), linear.bias.detach() if linear.bias is not None else None, density)
        return self

    def _init_from(self, weight: torch.Tensor, bias, density: float) -> None:
        if weight.is_meta:
            raise ValueError("SparseLinear cannot be made on the meta device: its sparsity pattern is data "
                             "(index buffers) chosen from the weights' magnitudes; make it on the CPU or the GPU")
        if isinstance(density, bool) or not (isinstance(density, numbers.Real) and 0.0 < density <= 1.0):
            raise ValueError(f"`density` must be in (0, 1]; got {density!r}")
        out_features, in_features = weight.shape
        self.in_features, self.out_features = in_features, out_features
        keep = max(1, min(weight.numel(), round(density * weight.numel()))) if weight.numel() else 0
        mask = torch.zeros(weight.numel(), dtype=torch.bool, device=weight.device)
        if keep:
            mask[torch.topk(weight.abs().flatten().float(), keep, sorted=False).indices] = True
        mask = mask.view_as(weight)
        # int32 indices when they fit: half the memory and index traffic of int64.
        fits = weight.numel() <= _INT32_MAX
        m = _from_mask(weight, mask, torch.int32 if fits else torch.int64)
        self.register_buffer("crow_indices", m.crow_indices)
        self.register_buffer("col_indices", m.col_indices)
        self.values = nn.Parameter(m.values.clone())
        self.bias = nn.Parameter(bias.clone()) if bias is not None else None

    @property
    def weight(self) -> CSRMatrix:
        """The weight as a :class:`CSRMatrix` sharing this module's tensors."""
        return CSRMatrix(self.crow_indices, self.col_indices, self.values,
                         (self.out_features, self.in_features), validate=False)

    @property
    def nnz(self) -> int:
        return self.col_indices.numel()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor("input", x, min_dim=1)
        check_no_transform("SparseLinear", x, self.values, self.bias)
        if x.shape[-1] != self.in_features:
            raise ValueError(f"`input` must have {self.in_features} features in its last dim; got shape {tuple(x.shape)}")
        lead = x.shape[:-1]
        if self.values.dtype != x.dtype and autocast_dtype(x) is None:
            raise TypeError(f"`input` must have the dtype of the layer's weight ({dtype_name(self.values.dtype)}); "
                            f"got {dtype_name(x.dtype)}")
        if self.in_features == 0:  # x · Wᵀ of zero features: the bias alone, as nn.Linear gives
            y = x.new_zeros(*lead, self.out_features)
            return y if self.bias is None else y + self.bias
        # under torch.autocast: x, the values and the bias in its dtype, as F.linear
        x, values, bias = autocast_args(x, x, self.values, self.bias)
        x2 = x.reshape(-1, self.in_features)
        # y = x·Wᵀ = (W·xᵀ)ᵀ: xᵀ is a column-major view of x and the op writes W·xᵀ column-major,
        # so y comes out row-major and nothing is copied.
        args = (self.crow_indices, self.col_indices, values, self.out_features, self.in_features, x2.mT, False, True)
        y = _csr_mm_op(*args) if needs_graph(values, x2) else _csr_mm_impl(*args)
        if bias is not None:
            y = y + bias
        return y.reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        n = self.in_features * self.out_features
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"nnz={self.nnz}, density={self.nnz / n if n else 0.0:.4g}")
