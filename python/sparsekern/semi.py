"""2:4 semi-structured sparsity: ``prune_2to4`` and ``SemiStructuredLinear``.

A 2:4 weight keeps at most 2 non-zeros in every group of 4 consecutive entries along the input
dim, the pattern Ampere and Hopper sparse tensor cores multiply at up to twice the dense rate. On
CUDA (float16 / bfloat16) the forward product runs through cuSPARSELt: the masked weight is
compressed once per weight version (an optimizer step makes a new version, so training
recompresses after each step), and one cuSPARSELt plan per (input height, shape, bias) is made,
searched once (``cusparseLtMatmulSearch`` keeps the fastest kernel configuration;
``SPARSEKERN_SEMI_SEARCH=0`` skips it) and reused. The search times kernels, so warm up before
capturing a CUDA graph.
cuSPARSELt is loaded at run time from the ``nvidia-cusparselt-cu13`` wheel (or
``SPARSEKERN_CUSPARSELT_PATH``); without it the CUDA path raises an error naming that package.

The backward pass is a documented dense fallback: ``dX = dY · (W∘M)`` and ``dW = (dYᵀ · X)∘M``
through cuBLAS (the input gradient's reduction runs along the output dim, where W has no 2:4
structure, so cuSPARSELt cannot take it). On the CPU, forward and backward are dense products
with the masked weight, in any float dtype.
"""
from __future__ import annotations

import collections
import os
import threading
import weakref
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from . import _C
from ._core import as_dlpack, check_backend, check_tensor, dtype_name, stream_of

__all__ = ["prune_2to4", "SemiStructuredLinear", "semi_plan_stats"]

_CUSPARSELT_DTYPES = (torch.float16, torch.bfloat16)


def cusparselt_enabled() -> bool:
    """Whether SemiStructuredLinear runs its CUDA forward through cuSPARSELt (opt-in for now).

    The first GPU run (H200, torch 2.11, CUDA 13.0) of the cuSPARSELt path hit an illegal-instruction
    error inside cuSPARSELt's search, which poisons the CUDA context of the whole process. Until that
    is understood the CUDA forward uses the dense product with the masked weight (correct, no 2:4
    speed-up); ``SPARSEKERN_CUSPARSELT=1`` turns the cuSPARSELt path on for debugging it.
    """
    return os.environ.get("SPARSEKERN_CUSPARSELT", "0") == "1"
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
# id(weight) -> _Compressed; entries die with their weight tensor (weakref.finalize).
_compressed: dict = {}
# (dtype, device index, m, n, k, bias pointer, stream) -> [plan, workspace]. Plans depend on shapes
# only (the weight and input pointers are passed per call), so layers of one shape share them.
_plans: dict = {}
_MAX_PLANS = 256  # distinct (m, shape, bias) plans kept; each new input height costs one search


def semi_plan_stats() -> dict:
    """Counters of the 2:4 CUDA path: cuSPARSELt ``plans_created``, ``searches``,
    ``compressions``, ``runs`` (C++), and this module's ``plan_cache_hits``,
    ``workspace_allocations`` and ``weight_cache_misses``."""
    out = dict(_C.semi_counters())
    for k in ("plan_cache_hits", "workspace_allocations", "weight_cache_misses"):
        out[k] = _stats[k]
    return out


def _search_enabled() -> bool:
    """SPARSEKERN_SEMI_SEARCH=0 keeps cuSPARSELt's default kernel instead of timing them all (for
    runs under compute-sanitizer, where the search is slow, or to rule the search out)."""
    return os.environ.get("SPARSEKERN_SEMI_SEARCH", "1") not in ("0", "false", "False", "")


def _round_up(v: int, to: int) -> int:
    return (v + to - 1) // to * to


class _Compressed:
    __slots__ = ("ref", "key", "data", "__weakref__")

    def __init__(self, ref, key, data):
        self.ref, self.key, self.data = ref, key, data


def _compressed_weight(weight: torch.Tensor, mask: torch.Tensor, n_pad: int, k_pad: int) -> torch.Tensor:
    """The cuSPARSELt-compressed (weight∘mask), padded to n_pad × k_pad; recompressed only when the
    weight or mask tensor changed (new tensor, or in-place update bumping its version)."""
    key = (weight.data_ptr(), weight._version, mask.data_ptr(), mask._version, weight.dtype, n_pad, k_pad)
    entry = _compressed.get(id(weight))
    if entry is not None and entry.ref() is weight and entry.key == key:
        return entry.data
    _stats["weight_cache_misses"] += 1
    with torch.no_grad():
        dense = weight * mask
        out_f, in_f = dense.shape
        if (n_pad, k_pad) != (out_f, in_f):
            dense = F.pad(dense, (0, k_pad - in_f, 0, n_pad - out_f))
        dense = dense.contiguous()
    nbytes, buffer_bytes = _C.semi_compressed_size(as_dlpack(dense))
    data = torch.empty(nbytes, dtype=torch.uint8, device=weight.device)
    buffer = torch.empty(buffer_bytes, dtype=torch.uint8, device=weight.device) if buffer_bytes else None
    _C.semi_compress(as_dlpack(dense), as_dlpack(data), *_ws(buffer), stream_of(weight))
    ident = id(weight)
    with _lock:
        fresh = entry is None or entry.ref() is not weight
        _compressed[ident] = _Compressed(weakref.ref(weight), key, data)
    if fresh:
        weakref.finalize(weight, _compressed.pop, ident, None)
    return data


def _linear_cuda(x2: torch.Tensor, weight: torch.Tensor, mask: torch.Tensor, bias: Optional[torch.Tensor]):
    """y = x2·(W∘M)ᵀ + bias through cuSPARSELt; x2 is (m, in_features)."""
    _ensure_cusparselt()
    m, in_f = x2.shape
    out_f = weight.shape[0]
    if m == 0:
        return x2.new_empty((0, out_f))
    m_pad, n_pad, k_pad = _round_up(max(m, 1), _ALIGN), _round_up(out_f, _ALIGN), _round_up(in_f, _ALIGN)
    comp = _compressed_weight(weight, mask, n_pad, k_pad)
    xk = x2
    if (m_pad, k_pad) != (m, in_f):
        # cuSPARSELt needs every dim a multiple of 16: zero rows/columns change no output entry.
        xk = F.pad(x2, (0, k_pad - in_f, 0, m_pad - m))
    xk = xk.contiguous()
    if xk.data_ptr() % 16:
        xk = xk.clone()  # a fresh allocation is aligned
    # The bias is fused into cuSPARSELt's epilogue when it fits the plan (no padding needed).
    fused = bias is not None and n_pad == out_f and bias.is_contiguous() and bias.data_ptr() % 16 == 0
    fb = bias if fused else None
    y = torch.empty((m_pad, n_pad), dtype=x2.dtype, device=x2.device)
    stream = stream_of(x2)
    key = (x2.dtype, x2.device.index, m_pad, n_pad, k_pad, fb.data_ptr() if fused else 0, stream)

    def args():  # fresh capsules per call: a DLPack capsule can be consumed only once
        return as_dlpack(xk), as_dlpack(comp), n_pad, _dl(fb), as_dlpack(y)

    with _lock:
        entry = _plans.get(key)
    if entry is None:
        plan = _C.SemiLinearPlan(*args())
        ws = _alloc(plan.workspace_size, x2.device)
        if _search_enabled():
            plan.search(*args(), *_ws(ws), stream)  # once per shape: keeps the fastest config
            if plan.workspace_size > (ws.numel() if ws is not None else 0):
                ws = _alloc(plan.workspace_size, x2.device)
        entry = [plan, ws]
        with _lock:
            _plans[key] = entry
            while len(_plans) > _MAX_PLANS:
                _plans.pop(next(iter(_plans)))
    else:
        _stats["plan_cache_hits"] += 1
    plan, ws = entry
    plan.run(*args(), *_ws(ws), stream)
    if (m_pad, n_pad) != (m, out_f):
        y = y[:m, :out_f].contiguous()
    if bias is not None and not fused:
        y = y + bias
    return y


def _dl(t):
    return as_dlpack(t) if t is not None else None


def _ws(t):
    """(pointer, bytes) of a scratch tensor, (0, 0) for none."""
    return (t.data_ptr(), t.numel()) if t is not None else (0, 0)


def _clear() -> None:
    """Drop the cached plans and compressed weights (at exit, and for tests)."""
    with _lock:
        _plans.clear()
        _compressed.clear()


def _alloc(nbytes: int, device):
    if not nbytes:
        return None
    _stats["workspace_allocations"] += 1
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


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


def _semi_linear_impl(x, weight, mask, bias):
    _check_linear(x, weight, mask, bias)
    if x.device.type != "cuda" or not cusparselt_enabled():
        return F.linear(x, weight * mask, bias)
    lead = x.shape[:-1]
    y = _linear_cuda(x.reshape(-1, x.shape[-1]), weight, mask, bias)
    return y.reshape(*lead, weight.shape[0])


@torch.library.custom_op("sparsekern::semi_linear", mutates_args=())
def _semi_linear_op(x: torch.Tensor, weight: torch.Tensor, mask: torch.Tensor,
                    bias: Optional[torch.Tensor]) -> torch.Tensor:
    """x·(weight∘mask)ᵀ + bias with a 2:4 mask (cuSPARSELt on CUDA, dense on the CPU)."""
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
        if torch.compiler.is_compiling() or (torch.is_grad_enabled() and (
                x.requires_grad or self.weight.requires_grad or (self.bias is not None and self.bias.requires_grad))):
            return _semi_linear_op(x, self.weight, self.mask, self.bias)
        return _semi_linear_impl(x, self.weight, self.mask, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, sparsity=2:4"
