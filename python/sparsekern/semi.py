"""2:4 semi-structured sparsity: ``prune_2to4`` and ``SemiStructuredLinear``.

A 2:4 weight keeps at most 2 non-zeros in every group of 4 consecutive entries along the input
dim, the pattern Ampere and Hopper sparse tensor cores multiply at up to twice the dense rate. On
CUDA (float16 / bfloat16) the forward product runs on the sparse tensor cores, through the
library's own CUTLASS sm90 kernel (Hopper) or cuSPARSELt: the masked weight is compressed once per
weight version (an optimizer step makes a new version, so training recompresses after each step),
and the way to run each (input height, shape, bias) is chosen once by timing, then cached: by
default the CUTLASS kernel's tile configurations (on sm_90) and cuSPARSELt's default kernel
configuration in both output layouts (Y directly, or Yᵀ and a transpose) against the dense product
with the masked weight, each checked against the dense result before it may win; the fastest is
kept, so a shape where the sparse kernels lose runs dense. A candidate that fails (an error status, an exception while planning, running or timing
it), or whose first timed call takes over 3x the dense product, is dropped and listed with its
reason in ``search_report()``; the winner is run and checked once more before it is kept, and a
cuSPARSELt failure after the choice switches that shape to the dense product with a warning. The
choice times kernels (it synchronises the stream), so warm up before capturing a CUDA graph: a
capture takes the choice timed for the same problem on another stream (torch.cuda.graph warms up on
one stream and captures on another), else cuSPARSELt's untimed default. A captured graph
compresses a weight that requires grad at every replay (a training step's graph sees each optimizer
step); a frozen weight (requires_grad False, e.g. ``model.requires_grad_(False)`` for inference
graphs) is compressed once, so after changing it in place, capture again (the next eager call
warns). What a capture read from the caches is kept alive for its replays until
``release_graph_buffers()`` (call it once those graphs are deleted). The caches key on the weight's
version counter, which an in-place op on ``weight.data`` does not advance: after such an update
call ``layer.refresh()``.

Why not every configuration by default: sweeping all of cuSPARSELt's configurations
(``SPARSEKERN_SEMI_SEARCH=1``, or its own ``cusparseLtMatmulSearch``, ``=lt``) found the fast ones,
but on an H200 with cuSPARSELt 0.8.0 some configurations of small problems (e.g. 16 × 64 → 32 fp16)
raise an illegal-instruction error, which poisons the process's CUDA context: no library can
recover from that, so the sweep is opt-in, for shapes you have checked in a separate process.

Measured on an H200 (cuSPARSELt 0.8.0, 8192x4096 -> 4096 with bias; docs/PERF_NOTES.md): dense
cuBLAS 0.33-0.42 ms (it varies with the GPU's clocks from run to run); cuSPARSELt's default
configuration 0.48-0.59 ms in fp16 and 0.42-0.53 ms in bf16 (slower than dense: fp16's other
configurations were slower still or failed with CUSPARSE_STATUS_INTERNAL_ERROR); the CUTLASS
kernel 0.30 ms with 128x128 tiles and 0.243 ms (fp16) / 0.246 ms (bf16) with 256x128 tiles, which the
choice keeps: ``sparsekern bench`` measured the module at 0.72x (fp16) and 0.71x (bf16) the dense
cuBLAS time, against the issue's target of at most 0.85x.

Environment:
- ``SPARSEKERN_SEMI_BACKEND``: ``auto`` (default: cuSPARSELt when libcusparseLt loads, else the
  dense fallback with one warning; on an sm_90 GPU the library's own CUTLASS 2:4 kernel is one
  more candidate of the timed choice, see below), ``cusparselt`` (cuSPARSELt only, never dense;
  an error if the library is missing), ``dense`` (the masked dense product, no cuSPARSELt). The
  older ``SPARSEKERN_CUSPARSELT=0/1`` means ``dense``/``cusparselt``.
- ``SPARSEKERN_SEMI_CUTLASS=0`` leaves the CUTLASS kernel out of the choice.

The CUTLASS sm90 kernel (src/semi/cutlass_sm90.cu: TMA + sparse wgmma, three tile configurations
timed as separate candidates, layout Y, the bias in its epilogue) is compiled into CUDA builds that target sm_90a, so it needs no
run-time library; it takes in_features that are multiples of 64 (other shapes leave it out). The
weight is compressed into CUTLASS's format once per weight version, like cuSPARSELt's.
- ``SPARSEKERN_SEMI_SEARCH``: ``default`` (default) the timed choice above; ``1`` also times every
  cuSPARSELt configuration (see the warning above); ``lt`` cuSPARSELt's own
  ``cusparseLtMatmulSearch`` per layout (same warning); ``0`` no timing: cuSPARSELt's default
  configuration (for compute-sanitizer runs).
- ``SPARSEKERN_SEMI_LAYOUT``: ``y`` or ``yt`` restricts the output layouts tried (default both;
  ``yt`` when not searching).
- ``SPARSEKERN_SEMI_OUTPUT``: ``contiguous`` (default) or ``strided``: with ``strided``, a module
  call outside autograd and ``torch.compile`` whose chosen layout is Yᵀ returns the transposed view
  of Yᵀ instead of copying it into a contiguous Y (what torch's own 2:4 linear returns; saves one
  read and write of the output). The custom op (autograd, compile) always returns contiguous output.
cuSPARSELt is loaded at run time from the ``nvidia-cusparselt-cu13`` wheel (or
``SPARSEKERN_CUSPARSELT_PATH``); with ``SPARSEKERN_SEMI_BACKEND=cusparselt`` and no library, the
CUDA path raises an error naming that package.

The backward pass is a documented dense fallback: ``dX = dY · (W∘M)`` and ``dW = (dYᵀ · X)∘M``
through cuBLAS (the input gradient's reduction runs along the output dim, where W has no 2:4
structure, so cuSPARSELt cannot take it). On the CPU, forward and backward are dense products
with the masked weight, in any float dtype.
"""
from __future__ import annotations

import collections
import contextlib
import os
import threading
import warnings
import weakref
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from . import _C
from ._core import (traced, version_of, refuse_forward_ad, _capturing, as_dlpack, autocast_cast, autocast_dtype, check_backend, check_no_transform, check_tensor,
                    dtype_name, outside_graph_pools, stream_of)

__all__ = ["prune_2to4", "SemiStructuredLinear", "semi_plan_stats"]

_CUSPARSELT_DTYPES = (torch.float16, torch.bfloat16)


def _backend_choice() -> str:
    """``auto``, ``cusparselt`` or ``dense`` from the environment (see the module docs)."""
    value = os.environ.get("SPARSEKERN_SEMI_BACKEND", "").strip().lower()
    if not value:
        legacy = os.environ.get("SPARSEKERN_CUSPARSELT", "").strip()
        return {"0": "dense", "1": "cusparselt"}.get(legacy, "auto")
    if value not in ("auto", "cusparselt", "dense"):
        raise ValueError(f"SPARSEKERN_SEMI_BACKEND must be auto, cusparselt or dense; got {value!r}")
    return value


def cusparselt_enabled() -> bool:
    """Whether SemiStructuredLinear's CUDA forward goes through cuSPARSELt: by default whenever
    CUDA is available and libcusparseLt loads (see ``SPARSEKERN_SEMI_BACKEND`` in the module docs)."""
    choice = _backend_choice()
    if choice == "dense":
        return False
    if choice == "cusparselt":
        return True
    return torch.cuda.is_available() and _try_load()
_ALIGN = 16  # cuSPARSELt wants every dim a multiple of 16 for 16-bit types (and 16-byte alignment)


def prune_2to4(w: torch.Tensor) -> torch.Tensor:
    """The 2:4 magnitude mask of ``w``: a bool tensor of ``w``'s shape that keeps the 2
    largest-magnitude entries of every group of 4 consecutive entries along the last dim (the
    input dim of a Linear weight). The last dim must be divisible by 4."""
    check_tensor("w", w, min_dim=1)
    if w.shape[-1] % 4:
        raise ValueError(f"`w` must have a last dim divisible by 4 for 2:4 pruning; got shape {tuple(w.shape)}")
    groups = w.detach().abs().float().reshape(-1, 4)
    keep = torch.topk(groups, 2, dim=1, sorted=False).indices
    mask = torch.zeros(groups.shape, dtype=torch.bool, device=w.device).scatter_(1, keep, True)
    return mask.view(w.shape)


# --------------------------------------------------------------------------------------------
# cuSPARSELt loading
# --------------------------------------------------------------------------------------------
_load_lock = threading.Lock()
_loaded = False
_load_error: Optional[str] = None  # why the automatic load failed (then the dense fallback runs)


def _candidate_paths() -> list:
    paths = []
    env = os.environ.get("SPARSEKERN_CUSPARSELT_PATH")
    if env:
        paths.append(env)
    try:
        import nvidia  # namespace package of NVIDIA's CUDA wheels

        for root in getattr(nvidia, "__path__", []):
            for sub in ("cu13/lib", "cusparselt/lib"):
                p = os.path.join(root, sub, "libcusparseLt.so.0")
                if os.path.exists(p):
                    paths.append(p)
    except ImportError:
        pass
    paths.append("")  # the dynamic loader's own search (LD_LIBRARY_PATH, RUNPATH, a copy torch loaded)
    return paths


def _try_load() -> bool:
    """Loads cuSPARSELt for the ``auto`` backend; on failure warns once and reports False."""
    global _load_error
    if _loaded:
        return True
    if _load_error is not None:
        return False
    try:
        _ensure_cusparselt()
        return True
    except RuntimeError as e:
        _load_error = str(e)
        warnings.warn(f"sparsekern: 2:4 layers run the dense fallback on CUDA: {e}", RuntimeWarning, stacklevel=3)
        return False


def _ensure_cusparselt() -> None:
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if _loaded:
            return
        if not _C.semi_built_with_cusparselt():
            raise RuntimeError(
                "2:4 products on CUDA need cuSPARSELt, but this sparsekern was built without its header "
                "(cusparseLt.h): pip install nvidia-cusparselt-cu13 and rebuild sparsekern")
        errors = []
        for path in _candidate_paths():
            try:
                _C.semi_load_cusparselt(path)
                _loaded = True
                return
            except RuntimeError as e:
                errors.append(str(e))
        raise RuntimeError(
            "2:4 products on CUDA need cuSPARSELt (libcusparseLt.so.0), which could not be loaded: "
            "pip install nvidia-cusparselt-cu13 (or set SPARSEKERN_CUSPARSELT_PATH). Tried:\n  "
            + "\n  ".join(errors))


# --------------------------------------------------------------------------------------------
# Compressed weights and plans
# --------------------------------------------------------------------------------------------
_stats = collections.Counter()
_lock = threading.Lock()
# id(weight) -> _WeightEntry; entries die with their weight tensor (weakref.finalize).
_compressed: dict = {}
# (dtype, device index, m, n, k, bias pointer, stream, settings) -> _Choice. Plans depend on shapes
# only (the weight and input pointers are passed per call), so layers of one shape share them.
_plans: dict = {}
_MAX_PLANS = 256  # distinct (m, shape, bias) choices kept; each new input height costs one timing
# The same keys -> the candidates timed for that choice (kind, layout, algorithm, ms, rel_err, error).
_reports: dict = {}


def semi_plan_stats() -> dict:
    """Counters of the 2:4 CUDA path: cuSPARSELt ``plans_created``, ``searches``,
    ``compressions``, ``runs`` (C++), and this module's ``plan_cache_hits``,
    ``workspace_allocations``, ``weight_cache_misses``, ``tunings`` (timed choices made) and
    ``dense_choices`` (choices where the dense product won)."""
    out = dict(_C.semi_counters())
    for k in ("plan_cache_hits", "workspace_allocations", "weight_cache_misses", "tunings", "dense_choices"):
        out[k] = _stats[k]
    return out


def search_report() -> list:
    """What each cached choice timed: a list of dicts (shape, chosen, candidates), for diagnosis."""
    with _lock:
        return [dict(key=str(k), **v) for k, v in _reports.items()]


def _search_mode() -> str:
    """``default`` (the default: time cuSPARSELt's default configuration against dense), ``time``
    (every configuration), ``lt`` (cusparseLtMatmulSearch) or ``off``; see the module docs."""
    value = os.environ.get("SPARSEKERN_SEMI_SEARCH", "default").strip().lower()
    if value in ("0", "false", "off", "no"):
        return "off"
    if value == "lt":
        return "lt"
    if value in ("1", "all", "true", "yes", "time"):
        return "time"
    return "default"


def _search_enabled() -> bool:
    return _search_mode() != "off"


def _layouts() -> list:
    """Output layouts to try, as y_transposed flags (Yᵀ first: torch's well-trodden layout)."""
    value = os.environ.get("SPARSEKERN_SEMI_LAYOUT", "").strip().lower()
    if value in ("y", "col"):
        return [False]
    if value in ("yt", "row"):
        return [True]
    if value:
        raise ValueError(f"SPARSEKERN_SEMI_LAYOUT must be y or yt; got {value!r}")
    return [True, False]


def _round_up(v: int, to: int) -> int:
    return (v + to - 1) // to * to


class _WeightEntry:
    __slots__ = ("ref", "key", "data", "__weakref__")

    def __init__(self, ref, key, data):
        self.ref, self.key, self.data = ref, key, data


# Cached tensors and plans that a CUDA-graph capture read, by id: a graph reads them at every replay
# and torch's graphs keep no input alive, so a cache that replaces or evicts one must not free it.
_graph_held: dict = {}


def _hold_for_graph(obj) -> None:
    with _lock:
        _graph_held[id(obj)] = obj


def release_graph_buffers() -> None:
    """Lets go of the compressed weights and plans that CUDA-graph captures read from the caches
    (kept alive for the graphs' replays, since torch's graphs do not keep their inputs alive).
    Call it after deleting those graphs, e.g. before capturing again with changed frozen weights;
    replaying a graph captured before the call is then undefined."""
    with _lock:
        _graph_held.clear()


# Frozen weights whose cached compressed (or masked) form a capture read: id -> (weakref, data
# pointer, version) at the capture. An eager call that finds the weight changed warns once.
_captured_frozen: dict = {}


def _warn_if_captured_changed(weight: torch.Tensor) -> None:
    rec = _captured_frozen.get(id(weight))
    if rec is None:
        return
    ref, ptr, version = rec
    if ref() is not weight:
        _captured_frozen.pop(id(weight), None)
    elif (weight.data_ptr(), version_of(weight)) != (ptr, version):
        _captured_frozen.pop(id(weight), None)
        warnings.warn("sparsekern: a CUDA graph captured a SemiStructuredLinear whose weight does not "
                      "require grad, and that weight has changed since: the graph's replays still "
                      "compute with the weight of its capture. Capture the graph again after changing "
                      "a frozen weight (a weight that requires grad is read at every replay).",
                      RuntimeWarning, stacklevel=4)


def _cached_for_weight(store: dict, weight: torch.Tensor, key: tuple, build):
    """``build()``'s result for `weight`, rebuilt only when `key` changes (a new tensor, or an
    in-place update bumping its version); the entry dies with the weight tensor.

    While a CUDA graph records, a weight that requires grad is built inside the graph, cache or
    not: the graph replays without running this code, so a cached result would stay the one of the
    capture's weight version through every later optimizer step (a training step's graph would
    compute with the old weight, silently). A frozen weight (requires_grad False: inference graphs)
    takes the cache, which then keeps that result alive; changing such a weight in place after the
    capture leaves the graph with the old value, and the next eager call warns."""
    entry = store.get(id(weight))
    capturing = weight.is_cuda and _capturing()
    if entry is not None and entry.ref() is weight and entry.key == key:
        if not capturing:
            return entry.data
        if not weight.requires_grad:
            _hold_for_graph(entry.data)
            with _lock:
                _captured_frozen[id(weight)] = (weakref.ref(weight), weight.data_ptr(), version_of(weight))
            return entry.data
    data = outside_graph_pools(weight.device, build)
    if capturing:
        # Built while a graph records: the graph runs the build at every replay, and its result
        # lives in the graph's pool, where no cache may keep it.
        return data
    ident = id(weight)
    with _lock:
        fresh = entry is None or entry.ref() is not weight
        store[ident] = _WeightEntry(weakref.ref(weight), key, data)
    if fresh:
        weakref.finalize(weight, store.pop, ident, None)
    return data


def _padded_masked(weight: torch.Tensor, mask: torch.Tensor, n_pad: int, k_pad: int) -> torch.Tensor:
    """(weight∘mask) zero-padded to n_pad × k_pad, contiguous: what both compressors take."""
    with torch.no_grad():
        dense = weight * mask
        out_f, in_f = dense.shape
        if (n_pad, k_pad) != (out_f, in_f):
            dense = F.pad(dense, (0, k_pad - in_f, 0, n_pad - out_f))
        return dense.contiguous()


def _compressed_weight(weight: torch.Tensor, mask: torch.Tensor, n_pad: int, k_pad: int) -> torch.Tensor:
    """The cuSPARSELt-compressed (weight∘mask), padded to n_pad × k_pad; recompressed only when the
    weight or mask tensor changed (new tensor, or in-place update bumping its version)."""

    def build():
        _stats["weight_cache_misses"] += 1
        dense = _padded_masked(weight, mask, n_pad, k_pad)
        nbytes, buffer_bytes = _C.semi_compressed_size(as_dlpack(dense))
        data = torch.empty(nbytes, dtype=torch.uint8, device=weight.device)
        buffer = torch.empty(buffer_bytes, dtype=torch.uint8, device=weight.device) if buffer_bytes else None
        _C.semi_compress(as_dlpack(dense), as_dlpack(data), *_ws(buffer), stream_of(weight))
        return data

    key = (weight.data_ptr(), version_of(weight), mask.data_ptr(), version_of(mask), weight.dtype, n_pad, k_pad)
    return _cached_for_weight(_compressed, weight, key, build)


_cutlass_compressed: dict = {}  # id(weight) -> _WeightEntry(weakref, key, (values, metadata))
_cutlass_devices: dict = {}  # device index -> whether the CUTLASS sm90 2:4 kernels run there


def _cutlass_usable(device: torch.device) -> bool:
    """Whether the CUTLASS sm90 2:4 kernels are a candidate on `device`: built into this library,
    an sm_90 device, and not switched off (``SPARSEKERN_SEMI_CUTLASS=0``)."""
    if os.environ.get("SPARSEKERN_SEMI_CUTLASS", "1").strip() == "0" or device.type != "cuda":
        return False
    idx = device.index if device.index is not None else torch.cuda.current_device()
    ok = _cutlass_devices.get(idx)
    if ok is None:
        ok = bool(_C.semi_built_with_cutlass_sm90() and _C.semi_cutlass_usable(idx))
        _cutlass_devices[idx] = ok
    return ok


def _cutlass_weight(weight: torch.Tensor, mask: torch.Tensor, n_pad: int, k_pad: int) -> tuple:
    """(values, metadata) of (weight∘mask) padded to n_pad × k_pad in CUTLASS's compressed 2:4
    format; rebuilt only when the weight or mask changed (as _compressed_weight)."""

    def build():
        _stats["weight_cache_misses"] += 1
        dense = _padded_masked(weight, mask, n_pad, k_pad)
        vbytes, mbytes, bbytes = _C.semi_cutlass_sizes(as_dlpack(dense))
        values = torch.empty(vbytes, dtype=torch.uint8, device=weight.device)
        meta = torch.empty(mbytes, dtype=torch.uint8, device=weight.device)
        buffer = torch.empty(bbytes, dtype=torch.uint8, device=weight.device) if bbytes else None
        _C.semi_cutlass_compress(as_dlpack(dense), as_dlpack(values), as_dlpack(meta), *_ws(buffer),
                                 stream_of(weight))
        return values, meta

    key = (weight.data_ptr(), version_of(weight), mask.data_ptr(), version_of(mask), weight.dtype, n_pad, k_pad)
    return _cached_for_weight(_cutlass_compressed, weight, key, build)


_masked: dict = {}  # id(weight) -> _WeightEntry(weakref, key, weight∘mask)


def _masked_weight(weight: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """weight∘mask for the dense choice, cached like the compressed weight (recomputed only when
    the weight or mask changed): multiplying per call cost ~0.1 ms at 4096 × 4096 (H200, fp16/bf16
    8192 × 4096 → 4096: 0.47 ms against F.linear's 0.35 ms)."""

    def build():
        with torch.no_grad():
            return (weight * mask).contiguous()

    key = (weight.data_ptr(), version_of(weight), mask.data_ptr(), version_of(mask), weight.dtype)
    return _cached_for_weight(_masked, weight, key, build)


class _Choice:
    """How one problem runs: ``kind`` "lt" (a cuSPARSELt plan, its workspace, its output layout),
    "cutlass" (the CUTLASS sm90 2:4 kernel and its workspace; layout Y) or "dense" (F.linear with
    the masked weight)."""
    __slots__ = ("kind", "plan", "ws", "y_transposed", "config")

    def __init__(self, kind, plan=None, ws=None, y_transposed=False, config=0):
        self.kind, self.plan, self.ws, self.y_transposed, self.config = kind, plan, ws, y_transposed, config


class _Problem:
    """One call's operands, padded for cuSPARSELt (every dim a multiple of 16, 16-byte aligned)."""

    def __init__(self, x2, weight, mask, bias, strided_ok=False):
        self.x2, self.weight, self.mask, self.bias = x2, weight, mask, bias
        self.strided_ok = strided_ok  # the Yᵀ layout may return its transposed view (no copy)
        self.m, in_f = x2.shape
        self.out_f = weight.shape[0]
        self.m_pad, self.n_pad, self.k_pad = (_round_up(self.m, _ALIGN), _round_up(self.out_f, _ALIGN),
                                              _round_up(in_f, _ALIGN))
        xk = x2
        if (self.m_pad, self.k_pad) != (self.m, in_f):
            # zero rows/columns change no output entry
            xk = F.pad(x2, (0, self.k_pad - in_f, 0, self.m_pad - self.m))
        xk = xk.contiguous()
        if xk.data_ptr() % 16:
            xk = xk.clone()  # a fresh allocation is aligned
        self.xk = xk
        # The bias is fused into cuSPARSELt's epilogue when it fits the plan (no padding needed).
        self.fused = (bias is not None and self.n_pad == self.out_f and bias.is_contiguous()
                      and bias.data_ptr() % 16 == 0)
        self.fb = bias if self.fused else None
        self.stream = stream_of(x2)
        self.comp = None  # compressed weight, filled by _linear_cuda
        self.cut = None  # CUTLASS's (values, metadata), filled by _linear_cuda when it is a candidate

    def y_buffer(self, y_transposed: bool) -> torch.Tensor:
        shape = (self.n_pad, self.m_pad) if y_transposed else (self.m_pad, self.n_pad)
        return torch.empty(shape, dtype=self.x2.dtype, device=self.x2.device)

    def args(self, y, y_transposed):  # fresh capsules per call: a DLPack capsule can be consumed only once
        return as_dlpack(self.xk), as_dlpack(self.comp), self.n_pad, _dl(self.fb), as_dlpack(y)

    def cutlass_choice(self, config: int) -> "_Choice":
        y = self.y_buffer(False)
        values, _ = self.cut
        need = _C.semi_cutlass_workspace_size(as_dlpack(self.xk), as_dlpack(values), self.n_pad, _dl(self.fb),
                                              as_dlpack(y), config)
        return _Choice("cutlass", ws=_alloc(need, self.x2.device), config=config)

    def make_plan(self, y_transposed: bool, algorithm: int = -1):
        y = self.y_buffer(y_transposed)
        plan = _C.SemiLinearPlan(*self.args(y, y_transposed), y_transposed=y_transposed, algorithm=algorithm)
        return plan, _alloc(plan.workspace_size, self.x2.device)

    def run(self, choice: _Choice) -> torch.Tensor:
        if choice.kind == "dense":
            return F.linear(self.x2, _masked_weight(self.weight, self.mask), self.bias)
        y = self.y_buffer(choice.y_transposed)
        if choice.kind == "cutlass":
            if self.cut is None:  # a cached choice: the (cached) compressed form of this call's weight
                self.cut = _cutlass_weight(self.weight, self.mask, self.n_pad, self.k_pad)
            values, meta = self.cut
            _C.semi_cutlass_linear(as_dlpack(self.xk), as_dlpack(values), as_dlpack(meta), self.n_pad, _dl(self.fb),
                                   as_dlpack(y), *_ws(choice.ws), self.stream, choice.config)
        else:
            choice.plan.run(*self.args(y, choice.y_transposed), *_ws(choice.ws), self.stream,
                            y_transposed=choice.y_transposed)
        if choice.y_transposed:
            y = y[:self.out_f, :self.m].t()
        elif (self.m_pad, self.n_pad) != (self.m, self.out_f):
            y = y[:self.m, :self.out_f]
        if not y.is_contiguous() and not (self.strided_ok and choice.y_transposed):
            y = y.contiguous()
        if self.bias is not None and not self.fused:
            y.add_(self.bias)  # y is ours (fresh), so in place is safe
        return y


def _time_once(fn) -> float:
    """Milliseconds of one call of `fn` (CUDA events on the current stream; synchronises)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _time_ms(fn, reps: int = 5) -> float:
    """Mean time of `reps` calls (CUDA events on the current stream); the caller has warmed `fn` up."""
    return _time_once(lambda: [fn() for _ in range(reps)]) / reps


# A candidate whose first timed call takes more than this many times the dense product is dropped
# without further timing: it cannot win, and some configurations are pathological (torch's alg 0 in
# the Y layout took 165 ms for fp16 8192x4096->4096 on an H200, 480x the dense 0.34 ms).
_ABANDON_FACTOR = 3.0
# ... and only past this many ms: one call of a small product measures clock ramps and launch noise
# more than the kernel (H100, 384 x 512 -> 256: CUTLASS's first timed call 0.150 ms against the
# dense 0.039 ms, then 0.030 ms timed properly: abandoned by noise, session 28); timing every
# candidate of such a product fully costs little.
_ABANDON_MIN_MS = 0.5
_TOL = 1e-2  # a wrong kernel is off by O(1); fp16/bf16 rounding of a correct one is far below this


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _check_device_alive(pb: "_Problem", rows: list) -> None:
    """After a candidate failed: a sticky CUDA error (an illegal address) breaks every later call
    in this process, dense included; say so instead of recording it against every candidate."""
    if pb.x2.device.type != "cuda":
        return
    try:
        torch.cuda.synchronize(pb.x2.device)
    except Exception as e:  # noqa: BLE001 - the context is gone; report what was tried
        raise RuntimeError(f"sparsekern semi: the CUDA context failed while timing 2:4 configurations "
                           f"({_error_text(e)}); candidates so far: {rows}") from e


def _choose(pb: _Problem, backend: str, mode: str) -> tuple:
    """Picks how to run `pb` (see the module docs); returns (choice, report). Any exception from
    planning, searching, running or timing one cuSPARSELt candidate marks that candidate failed
    (its row in the report carries the message) and the choice goes on; with the ``auto`` backend
    the dense product is always a candidate, so a problem where every cuSPARSELt configuration
    fails runs dense."""
    layouts = _layouts()
    rows = []
    if mode == "off" or _capturing():
        # untimed: cuSPARSELt's default configuration in the first layout (Yᵀ unless restricted)
        lname = "yt" if layouts[0] else "y"
        try:
            plan, ws = pb.make_plan(layouts[0])
            return _Choice("lt", plan, ws, layouts[0]), dict(chosen=f"lt layout={lname} alg=default", candidates=[])
        except Exception as e:  # noqa: BLE001 - recorded, and dense runs instead (auto backend)
            if backend == "cusparselt":
                raise
            rows.append(dict(kind="lt", layout=lname, algorithm=-1, default=True, error=_error_text(e)))
            _stats["dense_choices"] += 1
            return _Choice("dense"), dict(chosen="dense (cuSPARSELt failed)", candidates=rows)
    _stats["tunings"] += 1
    ref = F.linear(pb.x2, pb.weight * pb.mask, pb.bias)
    ref_norm = ref.float().norm().item()

    def checked(choice):
        out = pb.run(choice)
        return (out.float() - ref.float()).norm().item() / max(ref_norm, 1e-30)

    candidates = []  # (ms, choice, row)
    dense = _Choice("dense")
    pb.run(dense)  # warm-up
    dense_ms = _time_ms(lambda: pb.run(dense))  # timed in every mode: the bar for abandoning candidates
    rows.append(dict(kind="dense", ms=dense_ms, rel_err=0.0))
    if backend != "cusparselt":
        candidates.append((dense_ms, dense, rows[-1]))

    def evaluate(choice, row):
        try:
            row["rel_err"] = checked(choice)  # also the warm-up call
            if not row["rel_err"] <= _TOL:
                row["error"] = "wrong result"
                return
            first = _time_once(lambda: pb.run(choice))
            # (not when the backend forbids dense: then nothing is faster to fall back to)
            if backend != "cusparselt" and first > max(_ABANDON_FACTOR * dense_ms, _ABANDON_MIN_MS):
                row["error"] = f"abandoned: first timed call {first:.3f} ms > {_ABANDON_FACTOR:g}x dense {dense_ms:.3f} ms"
                return
            row["ms"] = _time_ms(lambda: pb.run(choice))
            candidates.append((row["ms"], choice, row))
        except Exception as e:  # noqa: BLE001 - one configuration failing must not stop the choice
            row["error"] = _error_text(e)
            _check_device_alive(pb, rows)

    if backend == "auto" and _cutlass_usable(pb.x2.device) and pb.k_pad % 64 == 0:
        # CUTLASS's sm90 kernel (compiled in, layout Y): each tile configuration timed like the others
        for config in range(_C.semi_cutlass_configs()):
            row = dict(kind="cutlass", layout="y", algorithm=config)
            try:
                if pb.cut is None:
                    pb.cut = _cutlass_weight(pb.weight, pb.mask, pb.n_pad, pb.k_pad)
                choice = pb.cutlass_choice(config)
            except Exception as e:  # noqa: BLE001 - recorded; the other candidates still run
                row["error"] = _error_text(e)
                _check_device_alive(pb, rows)
            else:
                evaluate(choice, row)
            rows.append(row)
    for yt in layouts:
        lname = "yt" if yt else "y"
        try:
            probe, probe_ws = pb.make_plan(yt)
            max_id = probe.max_algorithm_id
        except Exception as e:  # noqa: BLE001
            rows.append(dict(kind="lt", layout=lname, algorithm=-1, default=True, error=_error_text(e)))
            continue
        if mode == "lt":
            plans = [(-1, probe, probe_ws)]
            try:
                # cuSPARSELt's own search tries configurations that may need more workspace than
                # the default one: give it the largest any configuration asks for.
                need = probe.workspace_size
                for alg in range(max_id):
                    try:
                        p_alg, _ = pb.make_plan(yt, alg)
                        need = max(need, p_alg.workspace_size)
                        del p_alg
                    except Exception:  # noqa: BLE001 - a configuration that cannot plan is not searched either
                        pass
                searched, searched_ws = pb.make_plan(yt)  # its own plan: a failed search leaves the probe intact
                search_ws = _alloc(need, pb.x2.device)
                searched.search(*pb.args(pb.y_buffer(yt), yt), *_ws(search_ws), pb.stream, y_transposed=yt)
                del search_ws
                if searched.workspace_size > (searched_ws.numel() if searched_ws is not None else 0):
                    searched_ws = _alloc(searched.workspace_size, pb.x2.device)
                plans.append((searched.algorithm_id, searched, searched_ws))
            except Exception as e:  # noqa: BLE001 - the default configuration is still timed
                rows.append(dict(kind="lt-search", layout=lname, error=_error_text(e)))
                _check_device_alive(pb, rows)
        else:
            plans = [(-1, probe, probe_ws)]
            for alg in range(max_id if mode == "time" else 0):  # the sweep only when asked for
                try:
                    plan, ws = pb.make_plan(yt, alg)
                    plans.append((alg, plan, ws))
                except Exception as e:  # noqa: BLE001
                    rows.append(dict(kind="lt", layout=lname, algorithm=alg, error=_error_text(e)))
        for alg, plan, ws in plans:
            choice = _Choice("lt", plan, ws, yt)
            row = dict(kind="lt", layout=lname, algorithm=alg, default=alg < 0)
            if alg < 0:
                try:
                    row["algorithm"] = plan.algorithm_id
                except Exception:  # noqa: BLE001 - only a label
                    pass
            evaluate(choice, row)
            rows.append(row)
        del plans
    # Fastest first; the winner is run and checked once more before it is kept, so a configuration
    # that worked while timed but fails afterwards (the fp16 INTERNAL_ERROR seen on an H200 with
    # cuSPARSELt 0.8.0) loses to the next one instead of failing every later call.
    for ms, best, row in sorted(candidates, key=lambda c: c[0]):
        if best.kind in ("lt", "cutlass"):
            try:
                err = checked(best)
                if not err <= _TOL:
                    raise RuntimeError(f"wrong result on the re-check (rel_err {err:.3g})")
            except Exception as e:  # noqa: BLE001
                row["error"] = f"failed on the re-check: {_error_text(e)}"
                _check_device_alive(pb, rows)
                continue
        row["chosen"] = True
        if best.kind == "cutlass":
            chosen = f"cutlass layout=y config={best.config} {ms:.4f} ms"
        elif best.kind == "dense":
            _stats["dense_choices"] += 1
            chosen = f"dense {ms:.4f} ms"
        else:
            chosen = f"lt layout={'yt' if best.y_transposed else 'y'} alg={row['algorithm']} {ms:.4f} ms"
        return best, dict(chosen=chosen, candidates=rows)
    raise RuntimeError("sparsekern semi: no cuSPARSELt configuration ran correctly for "
                       f"{pb.m}x{pb.k_pad} · ({pb.out_f}x{pb.k_pad})ᵀ {pb.x2.dtype} (SPARSEKERN_SEMI_BACKEND="
                       f"cusparselt forbids the dense fallback): {rows}")


def _timed_on_another_stream(key: tuple) -> Optional[_Choice]:
    """The latest choice in _plans for the problem of `key` on another stream (key[6] is the
    stream; the latest is typically the warm-up's, whose compressed form is still cached), or None.
    Call with _lock held."""
    want = key[:6] + key[7:]
    for k, c in reversed(_plans.items()):
        if k[:6] + k[7:] == want:
            return c
    return None


def _same_choice(pb: _Problem, timed: _Choice) -> _Choice:
    """`timed`'s way of running `pb`, with a plan and workspace of its own."""
    if timed.kind == "dense":
        return _Choice("dense")
    if timed.kind == "cutlass":
        return pb.cutlass_choice(timed.config)
    plan, ws = pb.make_plan(timed.y_transposed, timed.plan.algorithm_id)
    return _Choice("lt", plan, ws, timed.y_transposed)


def _linear_cuda(x2: torch.Tensor, weight: torch.Tensor, mask: torch.Tensor, bias: Optional[torch.Tensor],
                 strided_ok: bool = False):
    """y = x2·(W∘M)ᵀ + bias through cuSPARSELt (or the dense product where it was timed faster);
    x2 is (m, in_features). With `strided_ok` the result may be the transposed view of Yᵀ."""
    _ensure_cusparselt()
    if _captured_frozen and not _capturing():
        _warn_if_captured_changed(weight)
    if x2.shape[0] == 0:
        return x2.new_empty((0, weight.shape[0]))
    pb = _Problem(x2, weight, mask, bias, strided_ok)
    backend, mode = _backend_choice(), _search_mode()
    key = (x2.dtype, x2.device.index, pb.m_pad, pb.n_pad, pb.k_pad, pb.fb.data_ptr() if pb.fused else 0,
           pb.stream, backend, mode, os.environ.get("SPARSEKERN_SEMI_LAYOUT", ""), strided_ok)
    with _lock:
        choice = _plans.get(key)
        timed = _timed_on_another_stream(key) if choice is None and _capturing() else None
    if timed is not None:
        # A capture on a stream without a choice of its own (torch.cuda.graph warms up on one
        # stream and captures on another; choices are per stream for their workspaces): the way
        # timed for this problem on another stream, with a plan and workspace of this capture's
        # own (in the graph's pool: kept by no cache). The untimed default would run instead,
        # cuSPARSELt's default configuration, 3-4x slower there (tools/diag/semi_capture_cost.py).
        if timed.kind == "lt":
            pb.comp = _compressed_weight(weight, mask, pb.n_pad, pb.k_pad)
        elif timed.kind == "cutlass":
            pb.cut = _cutlass_weight(weight, mask, pb.n_pad, pb.k_pad)
        return pb.run(_same_choice(pb, timed))
    if choice is None or choice.kind == "lt":
        try:
            pb.comp = _compressed_weight(weight, mask, pb.n_pad, pb.k_pad)
        except Exception as e:  # noqa: BLE001 - nothing was cached; the auto backend runs dense this call
            if backend == "cusparselt":
                raise
            _check_device_alive(pb, [])
            warnings.warn(f"sparsekern: cuSPARSELt could not compress a 2:4 weight ({_error_text(e)}); "
                          "running the dense fallback", RuntimeWarning, stacklevel=3)
            return F.linear(x2, weight * mask, bias)
    if choice is None:
        # the timing events belong to x's device (a CPU x only reaches here in the mocked tests)
        with torch.cuda.device(x2.device) if x2.device.type == "cuda" else contextlib.nullcontext():
            choice, report = _choose(pb, backend, mode)
        report.update(shape=f"{pb.m}x{x2.shape[1]}->{pb.out_f}", dtype=str(x2.dtype)[6:])
        if _capturing():  # its workspace is in the graph's pool: used by this capture, kept by no cache
            return pb.run(choice)
        with _lock:
            _plans[key] = choice
            _reports[key] = report
            while len(_plans) > _MAX_PLANS:
                old = next(iter(_plans))
                _plans.pop(old)
                _reports.pop(old, None)
            # The compressed forms the choice did not pick: free them (a later choice of another
            # input height that picks one rebuilds it on its first call).
            for store, kind in ((_compressed, "lt"), (_cutlass_compressed, "cutlass")):
                entry = store.get(id(weight))
                if choice.kind != kind and entry is not None and entry.ref() is weight:
                    del store[id(weight)]
    else:
        _stats["plan_cache_hits"] += 1
        if _capturing():  # the plan's workspace outlives an eviction from _plans (see _graph_held)
            _hold_for_graph(choice)
    if choice.kind == "dense" or backend == "cusparselt":
        return pb.run(choice)
    try:
        return pb.run(choice)
    except Exception as e:  # noqa: BLE001 - a cuSPARSELt failure after the choice: run dense from now on
        _check_device_alive(pb, [])
        warnings.warn(f"sparsekern: a cuSPARSELt 2:4 product failed after it was chosen ({_error_text(e)}); "
                      f"this shape runs the dense fallback from now on", RuntimeWarning, stacklevel=3)
        dense = _Choice("dense")
        with _lock:
            if _plans.get(key) is choice:
                _plans[key] = dense
                report = _reports.get(key)
                if report is not None:
                    report["chosen"] = f"dense (after a failed run: {_error_text(e)})"
        _stats["dense_choices"] += 1
        return pb.run(dense)


def _dl(t):
    return as_dlpack(t) if t is not None else None


def _ws(t):
    """(pointer, bytes) of a scratch tensor, (0, 0) for none."""
    return (t.data_ptr(), t.numel()) if t is not None else (0, 0)


def _clear() -> None:
    """Drop the cached plans and compressed weights (at exit, and for tests)."""
    with _lock:
        _plans.clear()
        _reports.clear()
        _compressed.clear()
        _cutlass_compressed.clear()
        _masked.clear()
        _graph_held.clear()
        _captured_frozen.clear()


def _alloc(nbytes: int, device):
    if not nbytes:
        return None
    _stats["workspace_allocations"] += 1
    return outside_graph_pools(device, lambda: torch.empty(nbytes, dtype=torch.uint8, device=device))


# --------------------------------------------------------------------------------------------
# Custom op
# --------------------------------------------------------------------------------------------
def _check_linear(x, weight, mask, bias) -> None:
    check_tensor("weight", weight)
    if weight.dim() != 2:
        raise ValueError(f"`weight` must be 2-D (out_features, in_features); got shape {tuple(weight.shape)}")
    out_f, in_f = weight.shape
    if in_f % 4:
        raise ValueError(f"`weight` in_features must be divisible by 4 for 2:4 sparsity; got {in_f}")
    check_tensor("input", x, min_dim=1)
    if x.shape[-1] != in_f:
        raise ValueError(f"`input` must have {in_f} features in its last dim; got shape {tuple(x.shape)}")
    if x.device != weight.device:
        raise ValueError(f"`input` must be on the device of `weight` ({weight.device}); got {x.device}")
    if x.dtype != weight.dtype:
        raise TypeError(f"`input` must have the dtype of `weight` ({dtype_name(weight.dtype)}); got {dtype_name(x.dtype)}")
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != weight.shape:
        raise ValueError(f"`mask` must be a bool tensor of shape {tuple(weight.shape)}")
    if mask.device != weight.device:
        raise ValueError(f"`mask` must be on the device of `weight` ({weight.device}); got {mask.device}")
    if bias is not None:
        check_tensor("bias", bias)
        if bias.shape != (out_f,) or bias.device != weight.device or bias.dtype != weight.dtype:
            raise ValueError(f"`bias` must be a {out_f}-vector with the dtype and device of `weight`")
    check_backend("input", x)
    if x.device.type == "cuda" and weight.dtype not in _CUSPARSELT_DTYPES:
        raise TypeError(f"`weight` must be float16 or bfloat16 for 2:4 products on CUDA (cuSPARSELt); got "
                        f"{dtype_name(weight.dtype)} (on the CPU any float dtype works through the dense fallback)")


def _strided_output() -> bool:
    """``SPARSEKERN_SEMI_OUTPUT=strided``: see the module docs."""
    value = os.environ.get("SPARSEKERN_SEMI_OUTPUT", "").strip().lower()
    if value not in ("", "contiguous", "strided"):
        raise ValueError(f"SPARSEKERN_SEMI_OUTPUT must be contiguous or strided; got {value!r}")
    return value == "strided"


def _semi_linear_impl(x, weight, mask, bias, strided_ok=False):
    _check_linear(x, weight, mask, bias)
    if x.device.type != "cuda" or not cusparselt_enabled():
        return F.linear(x, weight * mask, bias)  # the CPU path, and the dense fallback on CUDA
    lead = x.shape[:-1]
    y = _linear_cuda(x.reshape(-1, x.shape[-1]), weight, mask, bias, strided_ok)
    return y.reshape(*lead, weight.shape[0])


@torch.library.custom_op("sparsekern::semi_linear", mutates_args=())
def _semi_linear_op(x: torch.Tensor, weight: torch.Tensor, mask: torch.Tensor,
                    bias: Optional[torch.Tensor]) -> torch.Tensor:
    """x·(weight∘mask)ᵀ + bias with a 2:4 mask (cuSPARSELt on CUDA, dense on the CPU)."""
    refuse_forward_ad("semi_linear")
    return _semi_linear_impl(x, weight, mask, bias)


@_semi_linear_op.register_fake
def _(x, weight, mask, bias):
    _check_linear(x, weight, mask, bias)
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _semi_setup(ctx, inputs, output):
    x, weight, mask, bias = inputs
    ctx.save_for_backward(x, weight, mask)
    ctx.has_bias = bias is not None


def _semi_backward(ctx, grad):
    # Dense fallback (see the module docstring): the 2:4 structure runs along in_features, but
    # dX reduces over out_features, so cuSPARSELt cannot take it; cuBLAS does, with W∘M.
    x, weight, mask = ctx.saved_tensors
    g2 = grad.reshape(-1, grad.shape[-1])
    gx = gw = gb = None
    if ctx.needs_input_grad[0]:
        gx = (g2 @ (weight * mask)).reshape(x.shape)
    if ctx.needs_input_grad[1]:
        gw = (g2.mT @ x.reshape(-1, x.shape[-1])) * mask
    if ctx.has_bias and ctx.needs_input_grad[3]:
        gb = g2.sum(0)
    return gx, gw, None, gb


_semi_linear_op.register_autograd(_semi_backward, setup_context=_semi_setup)


class SemiStructuredLinear(nn.Module):
    """``nn.Linear`` whose weight is pruned to 2:4 along ``in_features`` (magnitude, per group of
    4). ``weight`` and ``bias`` are ordinary parameters; ``mask`` (a bool buffer) fixes the
    pattern, and the weight's pruned entries are zero. On CUDA (float16/bfloat16) the forward
    product runs on the sparse tensor cores through cuSPARSELt; see the module docs for the
    backward and the CPU path. ``in_features`` must be divisible by 4.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        if in_features % 4:
            raise ValueError(f"`in_features` must be divisible by 4 for 2:4 sparsity; got {in_features}")
        dense = nn.Linear(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self._init_from(dense.weight.detach(), dense.bias.detach() if bias else None)

    @classmethod
    def from_dense(cls, linear: nn.Linear) -> "SemiStructuredLinear":
        """Prunes an ``nn.Linear`` to 2:4 by magnitude (copies its parameters)."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"`linear` must be an nn.Linear; got {type(linear).__name__}")
        if linear.in_features % 4:
            raise ValueError(f"`linear.in_features` must be divisible by 4 for 2:4 sparsity; got {linear.in_features}")
        self = cls.__new__(cls)
        nn.Module.__init__(self)
        self._init_from(linear.weight.detach(), linear.bias.detach() if linear.bias is not None else None)
        return self

    def _init_from(self, weight: torch.Tensor, bias) -> None:
        self.out_features, self.in_features = weight.shape
        mask = prune_2to4(weight)
        self.weight = nn.Parameter(weight * mask)
        self.bias = nn.Parameter(bias.clone()) if bias is not None else None
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.weight, self.bias
        check_tensor("input", x)
        check_no_transform("SemiStructuredLinear", x, weight, bias)
        dt = autocast_dtype(x)
        if dt is not None:  # under torch.autocast (F.linear's policy: the operands in its dtype)
            if weight.dtype is not dt:
                # A weight of another dtype (fp32 parameters of mixed-precision training) would be
                # cast, compressed and planned again at every call: the dense masked product through
                # torch's autocast instead (2:4 kernels run where the layer is in fp16 / bf16).
                return F.linear(x, weight * self.mask, bias)
            x = autocast_cast(dt, x)
            if bias is not None and bias.dtype is not dt:  # a cast bias is a new tensor per call:
                return self._product(x, weight, None) + bias.to(dt)  # not fused (plans key on it)
        return self._product(x, weight, bias)

    def _product(self, x, weight, bias):
        if traced() or (torch.is_grad_enabled() and (
                x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad))):
            return _semi_linear_op(x, weight, self.mask, bias)
        # Outside autograd and compile, the output may be a strided view (SPARSEKERN_SEMI_OUTPUT); the
        # custom op always returns a contiguous tensor, the layout its fake implementation promises.
        return _semi_linear_impl(x, weight, self.mask, bias, strided_ok=_strided_output())

    def refresh(self) -> None:
        """Drops this layer's cached compressed (and masked) weight, so that the next call builds
        them from the weight as it is. Needed only after changing the weight in a way torch does not
        count as a change of the tensor: an in-place op on ``weight.data`` (as some master-weight
        copies do) leaves its version counter as it was, and the cache keys on it (optimizer steps,
        ``copy_`` under ``torch.no_grad()`` and new tensors are all seen)."""
        with _lock:
            for store in (_compressed, _cutlass_compressed, _masked):
                store.pop(id(self.weight), None)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, sparsity=2:4"
