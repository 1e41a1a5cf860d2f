"""Kronecker-factored products: ``x · (F1 ⊗ … ⊗ Fn)`` without ever forming the Kronecker product.

``kron_matmul(x, factors)`` multiplies the last dim of ``x`` (of size ∏ pᵢ) by ``F1 ⊗ … ⊗ Fn``
(factor i of shape (pᵢ, qᵢ)); ``kron_matmul(factors, x, left=True)`` is ``(F1 ⊗ … ⊗ Fn) @ x``.
Both are differentiable in ``x`` and in every factor, on CPU and CUDA, for float64, float32,
float16 and bfloat16. The CUDA path fuses consecutive small factors (p, q ≤ 64) into one kernel
whose intermediates stay in shared memory; larger factors run through cuBLAS one at a time (with
TF32 exactly when ``torch.backends.cuda.matmul.allow_tf32``). On the CPU every factor is one GEMM
step (the library's packed, register-tiled CPU GEMM); ``SPARSEKERN_KRON_CPU=emulate`` runs the
fused GPU kernels' block programs there instead, emulated (the test suite's setting: its CPU cases
then check the GPU kernels' arithmetic). The op is the ``torch.library``
custom op ``torch.ops.sparsekern.kron_matmul``, so it traces under ``torch.compile``.

``KronLinear`` is a drop-in linear layer whose weight is a Kronecker product of small factors.

Numerics of float16 / bfloat16: every product sums in float32, but a state between two kernels
(or two GEMM steps: every factor is one on the CPU) is stored in the input's dtype, as torch's
per-factor matmuls store theirs. So in float16 an intermediate state past 65504 becomes inf even
where the final product would be in range (scale the factors, or use bfloat16 or float32, where
that can happen); within one fused kernel the states stay in float32.

Forward kernel selection: float32 products whose factors all fuse into one kernel run one of three
fused kernels. Square factors with every p ∈ {4, 8, 16} and 1024 ≤ ∏ p ≤ 8192 (e.g. (8,8,8,8),
(16,16,16)) take the fiber-per-thread kernel for small factors (H200, 1024 rows: 14.7 and 18.7 µs
against 30.6 for the generic kernel); otherwise, with every p, q ≤ 64, every q a multiple of 4 and
some p ≥ 32, the register-tile kernel; the rest the generic fused kernel.
``SPARSEKERN_KRON_FWD=small`` also gives the small-factor kernel factors of 32, ``=new`` takes the
register-tile kernel wherever it fits and ``=old`` neither (read once per process;
``_C.kron_set_forward_kernel`` overrides it), for A/B measurements (see include/sparsekern/kron.h).

Backward selection: two implementations compute the same gradients. The fused native backward
(``_C.kron_matmul_backward``) runs the library's fused kernels; the step-wise backward
(``_backward_steps``) is reverse mode over the factor steps, every step one plain GEMM (cuBLAS
through ``torch.mm`` on CUDA), the forward's intermediate states recomputed once. Two float32
factors with every side a multiple of 4 and at most 64 take the native backward's register-tile
kernel (one kernel for ∂ℓ/∂x and both ∂ℓ/∂F; ``_regtile_backward``), which measured faster than
both others on every such shape (H200, fp32, device time, tools/diag/kron_bwd_fast.py:
(1024,[64,64]) 98 µs against 152 step-wise and 274 generic fused, (4096,[64,64]) 329 against 523
and 1038, (1024,[32,32]) 23 against 60 and 54). Otherwise CUDA tensors take the step-wise
backward for the factor shapes where it measured faster than the generic fused kernel
(``tools/diag/kron_bwd_steps.py``): two factors with 4096 ≤ p·q and p, q < 128 (e.g. (64, 96)
and (96, 64)) and three or more factors with p·q ≥ 1024 each ((128,[32,32,32]) 246 µs against
351); everything else (and the CPU) keeps the fused backward, e.g. (1024,[8,8,8,8]) 232 µs fused
against 635. ``SPARSEKERN_KRON_BWD=steps`` or ``=fused`` (read on every backward call) forces one;
``SPARSEKERN_KRON_BWD_KERNEL=old`` (``_C.kron_set_backward_kernel``) turns the register-tile
kernel off. Where the small-factor forward runs (square fp32 factors of 4 … 32, 1024 ≤ ∏ p ≤ 8192)
with three or more factors, the fused backward is the fiber-per-thread kernel (kron_small_bwd.h:
one kernel for ∂ℓ/∂x and every ∂ℓ/∂F; H100, device µs, against the generic fused kernel:
(1024,[8,8,8,8]) 85 against 190, (1024,[16,16,16]) 105 against 134, (256,[16,16,32]) 72 against
127); ``=small`` takes it for (32, 32) too, ``=new`` and ``=old`` never.
Products that no single fused kernel takes but whose modes 1 … n−1 one does (fp32, dense rows,
e.g. (256,[16,16,16,16]) and (128,[32,32,32])) run as a natural-order split in both directions
(kron_plan.cpp: plan_natural_tail): that kernel over the M · p₀ rows of x's own layout plus strided-
batched GEMMs for mode 0. Its backward measured faster than both the generic fused and the
step-wise one (H100, device µs: (256,[16,16,16,16]) 473 against 1082 and 1502, (128,[32,32,32])
180 against 303 and 237), so it overrides the shape rule's step-wise choice (``_natural_backward``).
Under ``torch.compile`` the choice is made when the backward is traced. The steps backward is made
of differentiable torch ops, so it also supports double backward (``create_graph=True``); in a
plain backward on CUDA its one transposed copy (of ∂ℓ/∂y) runs the library's tiled transpose.

``SPARSEKERN_KRON_BWD_SPLIT=B`` (a measurement knob, default 0) makes its ∂ℓ/∂F GEMMs B batched
GEMMs over slices of the long contraction, summed.

Kept states: an eager forward that records autograd and will take the fused native backward keeps
the intermediate states between its kernels (plans of several kernel groups whose backward runs
the same groups, e.g. two cuBLAS steps for factors of 128) instead of letting the backward
recompute them: about one x-sized buffer per extra group, held until the backward
(``SPARSEKERN_KRON_SAVE_STATES=0``: recompute; H200, (1024,[128,128]) backward 529 µs kept
against 648 µs recomputed). Two factors through the register-tile forward and backward keep
T0 = x·(I ⊗ F2) (M × p1·q2), which the forward computes anyway as its first step: the backward
then skips one of its five GEMMs ((1024,[64,64]) 98 µs against 130 µs recomputing, for about 3 µs
more in the forward). A natural-order split (three or more factors past the whole-row kernels,
e.g. 128 × (32,32,32)) keeps its head's input and, where its tail is such a two-factor product,
the tail's T0 as well: about two x-sized buffers (H100, 128 × (32,32,32) backward 101 µs kept
against 158 µs recomputed, for 1-2 µs more in the forward).
"""
from __future__ import annotations

import math
import numbers
import os
from typing import Sequence

import torch
from torch import nn

from . import _C
from ._core import (traced, _HAS_CUDA_BACKEND, FLOAT_DTYPES, _raw_stream, _raw_to_dlpack, _to_dlpack, _workspaces,
                    autocast_args, refuse_forward_ad, special, check_backend, check_no_transform, check_same, check_tensor, cublas_workspace)

__all__ = ["kron_matmul", "KronLinear", "kron_reference", "nearest_kronecker"]

_get_tf32 = torch._C._get_cublas_allow_tf32


# --------------------------------------------------------------------------------------------
# Argument checks (shared by the real and the fake implementations: same errors under compile)
# --------------------------------------------------------------------------------------------
_FLOAT = frozenset(FLOAT_DTYPES)


def _check_args(x, factors) -> tuple[int, int]:
    """Validate and return (P, Q) = (∏ pᵢ, ∏ qᵢ).

    Runs on every call: the valid case costs a few attribute reads per tensor (the small products
    of the benchmark table are host-bound, and the detailed checks below cost ~1 µs per factor);
    anything unusual takes the detailed path, which builds the messages.
    """
    if (type(factors) is list or type(factors) is tuple) and factors and isinstance(x, torch.Tensor) \
            and x.dtype in _FLOAT and x.dim() >= 1 and (x.is_cpu or (x.is_cuda and _HAS_CUDA_BACKEND)):
        dt, dev, cuda, cpu = x.dtype, x.get_device(), x.is_cuda, x.is_cpu
        P = Q = 1
        for f in factors:
            if not (isinstance(f, torch.Tensor) and f.dtype is dt and f.dim() == 2 and f.is_cuda is cuda
                    and f.is_cpu is cpu and f.get_device() == dev):
                break
            p, q = f.shape
            if p == 0 or q == 0:
                break
            P *= p
            Q *= q
        else:
            if x.shape[-1] == P:
                return P, Q
    return _check_args_detailed(x, factors)


def _check_args_detailed(x, factors) -> tuple[int, int]:
    if isinstance(factors, torch.Tensor) or not isinstance(factors, (list, tuple)):
        raise TypeError(f"`factors` must be a list or tuple of 2-D tensors; got {type(factors).__name__}")
    if len(factors) == 0:
        raise ValueError("`factors` must hold at least one factor; got an empty list")
    check_tensor("x", x, min_dim=1)
    check_backend("x", x)
    P = Q = 1
    for i, f in enumerate(factors):
        name = f"factors[{i}]"
        check_tensor(name, f)
        if f.dim() != 2:
            raise ValueError(f"`{name}` must be 2-D (p × q); got {f.dim()}-D shape {tuple(f.shape)}")
        check_same(name, f, "x", x)
        p, q = f.shape
        if p == 0 or q == 0:
            raise ValueError(f"`{name}` must have non-zero dims; got shape {tuple(f.shape)}")
        P *= p
        Q *= q
    if x.shape[-1] != P:
        rows = "·".join(str(f.shape[0]) for f in factors)
        raise ValueError(
            f"`x` must have last dim {P} (= {rows}, the product of the factors' rows); got shape {tuple(x.shape)}")
    return P, Q


def _factor_ready(f: torch.Tensor) -> torch.Tensor:
    """Factors need a unit stride along one dim (any transposed view is fine); copy otherwise."""
    if f.stride(1) == 1 or f.stride(0) == 1 or f.shape[0] == 1 or f.shape[1] == 1:
        return f
    return f.contiguous()


def _rows(t: torch.Tensor, cols: int) -> torch.Tensor:
    """(..., cols) as a 2-D (M, cols) view with contiguous rows (a copy only when needed)."""
    t2 = t.reshape(-1, cols)
    if t2.numel() == 0:  # empty tensors may carry any strides (even 0): give them plain ones
        return t.new_empty(t2.shape)
    if (cols > 1 and t2.stride(1) != 1) or (t2.shape[0] > 1 and t2.stride(0) < cols):
        t2 = t2.contiguous()  # e.g. broadcast (stride-0) gradients
    return t2


_allocators: dict = {}


def _allocator(t: torch.Tensor):
    """Workspace allocator handed to the native op: (pointer, bytes, owning tensor), from torch's
    caching allocator on the current stream (freed right after the launch, stream-ordered). One
    closure per device, made once (keyed by get_device(): −1 is the CPU)."""
    key = t.get_device()
    alloc = _allocators.get(key)
    if alloc is None:
        device = t.device

        def alloc(nbytes: int):
            buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
            return buf.data_ptr(), nbytes, buf
        _allocators[key] = alloc
    return alloc


def _native_args(t: torch.Tensor) -> tuple:
    """(allocator, blas workspace pointer, bytes, allow TF32, stream) for the native calls."""
    if not t.is_cuda:
        return _allocator(t), 0, 0, False, 0
    dev = t.get_device()
    stream = _raw_stream(dev)
    ws = _workspaces.get((dev, stream)) or cublas_workspace(t, stream)
    return _allocator(t), ws[0], ws[1], t.dtype is torch.float32 and bool(_get_tf32()), stream


# --------------------------------------------------------------------------------------------
# Implementations
# --------------------------------------------------------------------------------------------
def _forward(x: torch.Tensor, factors: Sequence[torch.Tensor], save: bool = False):
    """y = x · (F1 ⊗ … ⊗ Fn). With `save`, returns (y, saved): `saved` is the buffer in which the
    native op kept the intermediate states between its kernels for `_backward` (a tuple (pointer,
    bytes, owning tensor, kron_selection_epoch() before the forward)), or None when the plan has
    none to keep (one kernel group, or a backward that groups the factors differently)."""
    P, Q = _check_args(x, factors)
    if x.dim() == 2 and x.is_contiguous() and x.shape[0] > 0:
        x2 = x  # the common case, without reshape's dispatch
    else:
        x2 = _rows(x, P)
    out = torch.empty((x2.shape[0], Q), dtype=x.dtype, device=x.device)
    saved = None
    if x2.shape[0] > 0:
        na = _native_args(x)
        epoch = _C.kron_selection_epoch() if save else 0
        saved = _C.kron_matmul(_to_dlpack(x2), [_to_dlpack(_factor_ready(f)) for f in factors], _raw_to_dlpack(out),
                               *na, na[0] if save else None)
        if saved is not None:
            saved = (*saved, epoch)
    out = out if x.dim() == 2 else out.view(*x.shape[:-1], Q)
    return (out, saved) if save else out


def _backward(x: torch.Tensor, factors: Sequence[torch.Tensor], grad: torch.Tensor,
              needs: Sequence[bool], saved=None) -> list:
    """[∂ℓ/∂x, ∂ℓ/∂F1, …]; entries not in `needs` (x first, then one per factor) are None.
    `saved`: what `_forward(x, factors, save=True)` returned as its second value (the backward then
    reads the intermediate states instead of recomputing them)."""
    P, Q = _check_args(x, factors)
    if saved is not None and saved[3] != _C.kron_selection_epoch():
        # The kernel selection changed since the forward (kron_set_forward_kernel / _backward_kernel):
        # the backward's plan may read other states than the forward kept; recompute them.
        saved = None
    x2 = _rows(x, P)
    g2 = _rows(grad, Q)
    gx = torch.empty_like(x2, memory_format=torch.contiguous_format) if needs[0] else None
    gfs = [torch.empty(f.shape, dtype=f.dtype, device=f.device) if n else None
           for f, n in zip(factors, needs[1:])]
    if gx is not None or any(g is not None for g in gfs):
        _C.kron_matmul_backward(
            _to_dlpack(x2), [_to_dlpack(_factor_ready(f)) for f in factors], _to_dlpack(g2),
            _raw_to_dlpack(gx) if gx is not None and gx.numel() > 0 else None,
            [_raw_to_dlpack(g) if g is not None else None for g in gfs], *_native_args(x),
            *((saved[0], saved[1]) if saved is not None else (0, 0)))
    return [gx.view(x.shape) if gx is not None else None] + gfs


def _save_states() -> bool:
    """Whether a forward that records autograd keeps its intermediate states for the backward
    (``SPARSEKERN_KRON_SAVE_STATES``, read per call; default 1; 0 = recompute them in the backward,
    for memory: the states are about one activation of x's size per extra kernel group, held from
    forward to backward, like the intermediates torch keeps for the per-factor v2)."""
    return os.environ.get("SPARSEKERN_KRON_SAVE_STATES", "1") != "0"


def _steps_wanted(x: torch.Tensor, factors: Sequence[torch.Tensor]) -> bool:
    """Whether the backward runs step-wise (see the module docs): ``SPARSEKERN_KRON_BWD`` when set
    to ``steps`` or ``fused`` (read per call), else the shape rule on CUDA, else no."""
    forced = os.environ.get("SPARSEKERN_KRON_BWD")
    if forced == "steps":
        return True
    if forced == "fused" or not x.is_cuda:
        return False
    if _regtile_backward(x, factors):
        return False
    shapes = [tuple(f.shape) for f in factors]
    return _steps_faster(shapes) and not _natural_backward(x, factors, shapes)


_natural_plans: dict = {}


def _natural_backward(x: torch.Tensor, factors: Sequence[torch.Tensor], shapes) -> bool:
    """Whether the native backward plan is the natural-order split (fp32, three or more factors,
    dense rows: the small-factor or register-tile backward over modes 1 … n−1, then GEMMs for
    mode 0), which measured faster than the step-wise backward where the shape rule picks that
    (H100, device µs: (128,[32,32,32]) 180 against 237, (512,[32,32,32]) 558 against 864). Asked of
    the planner once per factor shapes, device and backward kernel selection, with a one-row probe
    (whether the planner splits does not depend on the row count). While tracing (torch.compile,
    fake or meta tensors) the planner is not asked and the shape rule stands, so that a compiled
    graph does not depend on what ran before it."""
    if x.dtype is not torch.float32 or len(shapes) < 3 or x.numel() == 0:
        return False
    if traced() or special(x):
        return False
    P = math.prod(p for p, _ in shapes)
    x2 = x.reshape(-1, P)
    if x2.shape[0] > 1 and (x2.stride(1) != 1 or x2.stride(0) != P):
        return False  # the split needs dense rows
    key = (tuple(shapes), x.device, _C.kron_backward_kernel())
    hit = _natural_plans.get(key)
    if hit is None:
        probe = torch.empty(1, P, dtype=x.dtype, device=x.device)
        plan = _C.kron_describe_plan(_to_dlpack(probe), [_to_dlpack(_factor_ready(f)) for f in factors], True)
        hit = _natural_plans[key] = "order=natural" in plan
    return hit


def _regtile_backward(x: torch.Tensor, factors: Sequence[torch.Tensor]) -> bool:
    """Whether the native backward runs the two-factor register-tile kernel (fp32, every side a
    multiple of 4 and ≤ 64, not deselected by SPARSEKERN_KRON_BWD_KERNEL=old): faster than the
    step-wise backward on every shape measured (see the module docs)."""
    return (x.dtype is torch.float32 and len(factors) == 2
            and all(s <= 64 and s % 4 == 0 for f in factors for s in f.shape)
            and _C.kron_backward_kernel() != "old")


def _steps_faster(shapes) -> bool:
    """The H200 measurements of the module docs as a rule over the factor shapes (p, q)."""
    if len(shapes) == 2:
        return all(p * q >= 4096 and p < 128 and q < 128 for p, q in shapes)
    return len(shapes) >= 3 and all(p * q >= 1024 for p, q in shapes)


def _steps_split() -> int:
    """``SPARSEKERN_KRON_BWD_SPLIT=B`` (read per call; a measurement knob, default 0): compute each
    ∂ℓ/∂Fₖ as B batched GEMMs over slices of its long contraction, summed, instead of one GEMM.
    The GEMM is (pₖ × qₖ) with K = rowsₖ (up to 10⁵-10⁶): one output tile unless cuBLAS splits K
    itself, which is what the knob lets the GPU run compare."""
    try:
        return max(int(os.environ.get("SPARSEKERN_KRON_BWD_SPLIT", "0")), 0)
    except ValueError:
        return 0


def _grad_factor(state: torch.Tensor, h: torch.Tensor, split: int) -> torch.Tensor:
    """∂ℓ/∂Fₖ = stateᵀ · hᵀ for state (rows, p) and h (q, rows): one GEMM, or `split` batched GEMMs
    over row slices summed (plus one GEMM for the rows that do not fill a slice)."""
    rows, p = state.shape
    q = h.shape[0]
    chunk = rows // split if split > 1 else 0
    if chunk == 0:
        return torch.mm(state.mT, h.mT)
    main = split * chunk
    sb = state[:main].view(split, chunk, p)                   # (B, chunk, p)
    hb = h[:, :main].reshape(q, split, chunk).permute(1, 2, 0)  # (B, chunk, q), a view: strides (chunk, 1, rows)
    out = torch.bmm(sb.mT, hb).sum(0)
    if main < rows:
        out = out + torch.mm(state[main:].mT, h[:, main:].mT)
    return out


def _transposed(t: torch.Tensor) -> torch.Tensor:
    """tᵀ of a 2-D t as a contiguous (cols, rows) tensor. On CUDA, when no autograd graph is
    recorded and nothing is traced, through the library's tiled transpose (torch's strided copy,
    `t.mT.contiguous()`, took 120 µs for the (4096, 4096) fp32 ∂ℓ/∂y of (4096,[64,64])'s backward
    on an H200); otherwise torch's, which autograd and torch.compile see."""
    if (t.is_cuda and _HAS_CUDA_BACKEND and not torch.is_grad_enabled() and not traced()
            and t.dim() == 2 and t.numel() > 0 and t.stride(1) == 1 and t.stride(0) >= t.shape[1]):
        out = torch.empty((t.shape[1], t.shape[0]), dtype=t.dtype, device=t.device)
        _C.transpose(_to_dlpack(t), _to_dlpack(out), _raw_stream(t.get_device()))
        return out
    return t.mT.contiguous()


def _backward_steps(x: torch.Tensor, factors: Sequence[torch.Tensor], grad: torch.Tensor,
                    needs: Sequence[bool]) -> list:
    """[∂ℓ/∂x, ∂ℓ/∂F1, …] like :func:`_backward`, as reverse mode over the factor steps: every step
    is one plain GEMM (``torch.mm``: cuBLAS on CUDA, TF32 per ``allow_tf32``, accumulation as
    torch's), no permute copies; torch ops only, so any device and dtype, and differentiable.

    Index conventions (0-based factors k = 0 … n−1, Fₖ of shape (pₖ, qₖ); a row of x is indexed by
    (i₀, …, iₙ₋₁) with i₀ slowest, as in ``torch.kron``; m is the row of x, M rows):

        y[m, (j₀…jₙ₋₁)] = Σ_i x[m, (i₀…iₙ₋₁)] · Πₖ Fₖ[iₖ, jₖ]

    Forward as steps (the "shuffle" order, last factor first; the batch index m rotates like a
    mode, which is what makes each step one GEMM with no permute). State Sₖ is the input of the
    step that applies Fₖ, a contiguous buffer whose modes, slowest first, are

        Sₖ = (jₖ₊₁ … jₙ₋₁, m, i₀ … iₖ)   viewed as the matrix (rowsₖ, pₖ),
        rowsₖ = M · Πⱼ₍<ₖ₎ pⱼ · Πⱼ₍>ₖ₎ qⱼ,

    so Sₙ₋₁ = x as (M·P/pₙ₋₁, pₙ₋₁). The step contracts the last mode and writes the new one first:

        Sₖ₋₁ = (Sₖ · Fₖ)ᵀ = Fₖᵀ · Sₖᵀ          (qₖ, rowsₖ), one GEMM, K = pₖ,

    and (qₖ, rowsₖ) is, as memory, Sₖ₋₁'s (rowsₖ₋₁, pₖ₋₁). After F₀ the buffer is (j₀…jₙ₋₁, m) = yᵀ.

    Backward, with Hₖ = ∂ℓ/∂(Sₖ · Fₖ)ᵀ in that step's output layout (qₖ, rowsₖ); H₀ = (∂ℓ/∂y)ᵀ made
    contiguous (the one copy, M·Q elements; skipped for n = 1 where the transposed view serves):

        ∂ℓ/∂Fₖ = Sₖᵀ · Hₖᵀ       (pₖ, qₖ), one GEMM, K = rowsₖ = M · Πⱼ≠ₖ dims
        ∂ℓ/∂Sₖ = Hₖᵀ · Fₖᵀ       (rowsₖ, pₖ), one GEMM, K = qₖ; as memory this is Hₖ₊₁ (qₖ₊₁, rowsₖ₊₁),
                                  and for k = n−1 it is ∂ℓ/∂x as (M, P).

    Cost (square factors p, P = pⁿ): the forward is n GEMMs of 2·M·P·p FLOPs. This backward
    recomputes S₀ … Sₙ₋₂ from x once (n−1 GEMMs) and runs 2n GEMMs: (3n−1)/n times the forward's
    FLOPs; it moves about (6n−2)·M·P elements (each GEMM reads its state and writes one) plus the
    transposed copy of ∂ℓ/∂y. Needs: only the ∂ℓ/∂Fₖ asked for are computed, and the chain stops
    at the last factor asked for when x needs no gradient (no ∂ℓ/∂x GEMM).

    Memory: the recomputed states are held from the recompute until their ∂ℓ/∂Fₖ (only those of
    wanted factors are kept), at most n−1 buffers of about M·P elements alive at once during the
    backward. Saving them in the forward instead would skip the n−1 recompute GEMMs but keeps
    n−1 extra activations per call alive from forward to backward (and the fused forward does not
    produce them): recompute is the default here.
    """
    P, Q = _check_args(x, factors)
    n = len(factors)
    need_x = bool(needs[0])
    need_f = [bool(v) for v in needs[1:]]
    if not need_x and not any(need_f):
        return [None] * (n + 1)
    ps = [f.shape[0] for f in factors]
    qs = [f.shape[1] for f in factors]
    x2 = x.reshape(-1, P)
    M = x2.shape[0]
    # rowsₖ explicitly: reshape(-1, ·) cannot infer a dim of an empty state.
    rows = [M * math.prod(ps[:k]) * math.prod(qs[k + 1:]) for k in range(n)]
    # The last factor the backward reaches: all of them for ∂ℓ/∂x, else the last one wanted.
    last = n - 1 if need_x else max(k for k in range(n) if need_f[k])

    # Recompute S_{n-1} (= x) … S_0, keeping only the states whose ∂ℓ/∂Fₖ is wanted.
    states: list = [None] * n
    s = x2.contiguous().view(rows[n - 1], ps[n - 1])
    for k in range(n - 1, -1, -1):
        if need_f[k]:
            states[k] = s
        if k == 0:
            break
        s = torch.mm(factors[k].mT, s.mT).view(rows[k - 1], ps[k - 1])
    del s

    g2 = grad.reshape(M, Q)
    # H₀ = (∂ℓ/∂y)ᵀ as (q₀, rows₀); with one factor rows₀ = M and the transposed view is that matrix.
    h = g2.mT if n == 1 else _transposed(g2).view(qs[0], rows[0])
    gfs: list = [None] * n
    gx = None
    split = _steps_split()
    for k in range(last + 1):
        if need_f[k]:
            gfs[k] = _grad_factor(states[k], h, split)
            states[k] = None  # free the state as soon as its gradient is done
        if k < last or need_x:
            dstate = torch.mm(h.mT, factors[k].mT)  # (rowsₖ, pₖ)
            if k < n - 1:
                h = dstate.view(qs[k + 1], rows[k + 1])
            else:
                gx = dstate.view(x.shape)
    return [gx] + gfs


# --------------------------------------------------------------------------------------------
# Custom ops + autograd
# --------------------------------------------------------------------------------------------
@torch.library.custom_op("sparsekern::kron_matmul", mutates_args=())
def _kron_op(x: torch.Tensor, factors: list[torch.Tensor]) -> torch.Tensor:
    refuse_forward_ad("kron_matmul")
    return _forward(x, factors)


@_kron_op.register_fake
def _(x, factors):
    _, Q = _check_args(x, factors)
    return x.new_empty((*x.shape[:-1], Q))


@torch.library.custom_op("sparsekern::kron_matmul_backward", mutates_args=())
def _kron_backward_op(x: torch.Tensor, factors: list[torch.Tensor], grad: torch.Tensor,
                      needs: list[bool]) -> list[torch.Tensor]:
    # Unwanted gradients are fresh empty tensors (custom-op outputs must not alias each other).
    return [g if g is not None else x.new_empty(0) for g in _backward(x, factors, grad, needs)]


@_kron_backward_op.register_fake
def _(x, factors, grad, needs):
    _check_args(x, factors)
    return [x.new_empty(x.shape) if needs[0] else x.new_empty(0)] + [
        f.new_empty(f.shape) if n else x.new_empty(0) for f, n in zip(factors, needs[1:])]


def _setup_context(ctx, inputs, output):
    x, factors = inputs
    ctx.save_for_backward(x, *factors)


def _autograd_backward(ctx, grad):
    x, *factors = ctx.saved_tensors
    need_x, need_f = ctx.needs_input_grad
    needs = [bool(need_x)] + [bool(n) for n in need_f]
    # torch ops: traced as they are under torch.compile, and differentiable again (create_graph,
    # where the native backward op has no autograd formula of its own)
    if _steps_wanted(x, factors) or torch.is_grad_enabled():
        gx, *gfs = _backward_steps(x, factors, grad, needs)
        return gx, gfs
    res = _kron_backward_op(x, factors, grad, needs)
    gx = res[0] if needs[0] else None
    gfs = [g if n else None for g, n in zip(res[1:], needs[1:])]
    return gx, gfs


_kron_op.register_autograd(_autograd_backward, setup_context=_setup_context)


class _KronFunction(torch.autograd.Function):
    """Eager autograd without the custom-op dispatch (the custom op is for tracing): its generated
    autograd wrapper plus a second custom op for the backward cost more host time than the whole
    backward of the small products (the H200 run measured the backward at 4-11x the forward on
    shapes where both kernels take a few µs)."""

    @staticmethod
    def forward(ctx, x, *factors):
        ctx.save_for_backward(x, *factors)
        # Multi-kernel plans keep their intermediate states for the native backward (which would
        # otherwise recompute them: one GEMM pass of (1024,[128,128])'s ~5); the step-wise
        # backward recomputes its own (its states have another layout).
        if _save_states() and not _steps_wanted(x, factors):
            y, ctx.kron_states = _forward(x, factors, save=True)
            return y
        ctx.kron_states = None
        return _forward(x, factors)

    @staticmethod
    def backward(ctx, grad):
        x, *factors = ctx.saved_tensors
        needs = ctx.needs_input_grad
        # torch ops where asked for, and under create_graph (a double backward: gradient penalties,
        # Hessian-vector products), where they are differentiable; the native backward op has no
        # autograd formula of its own (it raised "no autograd formula was registered" there)
        # autograd, and where compiled autograd traces this backward (torch ops trace; the native call does not)
        if _steps_wanted(x, factors) or torch.is_grad_enabled() or traced():
            return tuple(_backward_steps(x, factors, grad, needs))
        return tuple(_backward(x, factors, grad, needs, ctx.kron_states))


_grad_enabled = torch.is_grad_enabled


def _dispatch(x, factors):
    """The custom op when tracing (or for fake/meta tensors and other subclasses), the autograd
    Function when a graph is needed in eager mode, else straight to the native call."""
    check_no_transform("kron_matmul", x, *factors)
    if traced() or special(x, *factors):
        return _kron_op(x, list(factors))
    if _grad_enabled() and (x.requires_grad or any(f.requires_grad for f in factors)):
        return _KronFunction.apply(x, *factors)
    return _forward(x, factors)


def _check_factor_types(factors) -> None:
    """Every factor a tensor, named if not (the custom op's schema refused a list holding an array
    with a message about 'List[Tensor]' before the library's own check ran)."""
    for i, f in enumerate(factors):
        if not isinstance(f, torch.Tensor):
            raise TypeError(f"`factors[{i}]` must be a torch.Tensor; got {type(f).__name__}")


def kron_matmul(a, b, *, left: bool = False) -> torch.Tensor:
    """Kronecker-factored product without forming the Kronecker product.

    ``kron_matmul(x, factors)`` returns ``x @ (F1 ⊗ … ⊗ Fn)`` for ``x`` of shape ``(..., ∏ pᵢ)`` and
    ``factors = [F1, …, Fn]`` with ``Fᵢ`` of shape ``(pᵢ, qᵢ)``: a tensor of shape ``(..., ∏ qᵢ)``.
    Any number of factors ≥ 1; they need not be square or equal.

    ``kron_matmul(factors, x, left=True)`` returns ``(F1 ⊗ … ⊗ Fn) @ x`` for ``x`` of shape
    ``(∏ qᵢ,)`` or ``(..., ∏ qᵢ, N)`` (like ``torch.matmul``): shape ``(∏ pᵢ,)`` or ``(..., ∏ pᵢ, N)``.
    It runs the right product on transposed views (``x`` is copied to make its rows contiguous
    unless N = 1) and returns a transposed view of its result.

    Differentiable in ``x`` and in every factor.
    """
    if left:
        factors, x = a, b
        if isinstance(factors, nn.ParameterList):
            factors = list(factors)
        if isinstance(factors, torch.Tensor) or not isinstance(factors, (list, tuple)):
            raise TypeError(
                f"`factors` must be a list or tuple of 2-D tensors; got {type(factors).__name__} "
                "(with left=True the factors come first: kron_matmul(factors, x, left=True))")
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"`x` must be a torch.Tensor; got {type(x).__name__}")
        # Checked here in the caller's orientation (the right product below sees transposed views,
        # and its messages would name the transposed shapes).
        _check_factor_types(factors)
        for i, f in enumerate(factors):
            if f.dim() != 2:
                raise ValueError(f"`factors[{i}]` must be 2-D (p × q); got {f.dim()}-D shape {tuple(f.shape)}")
            if 0 in f.shape:
                raise ValueError(f"`factors[{i}]` must have non-zero dims; got shape {tuple(f.shape)}")
        if x.dim() == 0:
            raise ValueError("`x` must have at least 1 dim for left=True; got a 0-D tensor")
        Q = math.prod([f.shape[1] for f in factors])  # a list: dynamo graph-broke on the generator
        if factors and x.shape[0 if x.dim() == 1 else -2] != Q:
            cols = "·".join(str(f.shape[1]) for f in factors)
            raise ValueError(f"`x` must have {'size' if x.dim() == 1 else 'dim -2 of size'} {Q} (= {cols}, the "
                             f"product of the factors' columns) for left=True; got shape {tuple(x.shape)}")
        ft = [f.mT for f in factors]
        if x.dim() == 1:
            return kron_matmul(x, ft)
        return kron_matmul(x.mT, ft).mT
    x, factors = a, b
    if isinstance(factors, nn.ParameterList):
        factors = list(factors)
    if isinstance(factors, (list, tuple)) and factors and isinstance(x, torch.Tensor):
        _check_factor_types(factors)
        x, *factors = autocast_args(x, x, *factors)  # under torch.autocast: in its dtype, as torch.matmul
        return _dispatch(x, factors)
    return _forward(x, factors)  # raises the argument error


def kron_reference(x: torch.Tensor, factors: Sequence[torch.Tensor]) -> torch.Tensor:
    """``x @ (F1 ⊗ … ⊗ Fn)`` one factor at a time in plain torch (reshape, matmul, transpose): the
    "v2" of ``sparsekern kron`` and the reference of the tests for sizes where the Kronecker
    product is too large to form. Differentiable through torch's autograd."""
    P = math.prod([f.shape[0] for f in factors])
    batch = x.shape[:-1]
    y = x.reshape(-1, P)
    M = y.shape[0]
    for f in reversed(factors):
        p, q = f.shape
        n = y.shape[1] // p
        y = (y.reshape(M, n, p) @ f).transpose(1, 2).reshape(M, n * q)
    return y.reshape(*batch, y.shape[1])


# --------------------------------------------------------------------------------------------
# Module
# --------------------------------------------------------------------------------------------
def _parse_shapes(factor_shapes) -> list[tuple[int, int]]:
    if isinstance(factor_shapes, (int, torch.Tensor)) or not hasattr(factor_shapes, "__iter__"):
        raise TypeError(f"`factor_shapes` must be a list of (p, q) pairs; got {type(factor_shapes).__name__}")
    shapes = []
    for i, s in enumerate(factor_shapes):
        try:
            pair = tuple(s)
        except TypeError:
            pair = ()
        # Integers only (NumPy's too): int(2.9) or int(True) would pass a size nobody asked for.
        if len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in pair):
            raise TypeError(f"`factor_shapes[{i}]` must be a (p, q) pair of ints; got {s!r}")
        p, q = int(pair[0]), int(pair[1])
        if p <= 0 or q <= 0:
            raise ValueError(f"`factor_shapes[{i}]` must be positive; got {(p, q)}")
        shapes.append((p, q))
    if not shapes:
        raise ValueError("`factor_shapes` must hold at least one (p, q) pair; got an empty list")
    return shapes


def nearest_kronecker(w: torch.Tensor, factor_shapes) -> tuple[list[torch.Tensor], float]:
    """Factors ``[F1, …, Fn]`` with ``F1 ⊗ … ⊗ Fn`` nearest to ``w`` (∏pᵢ × ∏qᵢ) in Frobenius norm,
    and the relative error ‖w − ⊗Fᵢ‖ / ‖w‖.

    Two factors: the Van Loan–Pitsianis rearrangement maps ``A ⊗ B`` to the rank-one matrix
    ``vec(A) vec(B)ᵀ``, so the best ``A ⊗ B`` comes from the top singular pair of the rearranged
    ``w`` (exactly optimal). More factors: ``w ≈ F1 ⊗ R`` first, then ``R`` recursively (greedy).
    """
    shapes = _parse_shapes(factor_shapes)
    P = math.prod(p for p, _ in shapes)
    Q = math.prod(q for _, q in shapes)
    if w.dim() != 2 or tuple(w.shape) != (P, Q):
        raise ValueError(f"`w` must be {P}x{Q} for factor shapes {shapes}; got shape {tuple(w.shape)}")
    w64 = w.detach().to(torch.float64)
    factors = []
    rest = w64
    for i, (p1, q1) in enumerate(shapes[:-1]):
        p2, q2 = rest.shape[0] // p1, rest.shape[1] // q1
        # R[(i1, j1), (i2, j2)] = W[(i1, i2), (j1, j2)]
        r = rest.reshape(p1, p2, q1, q2).permute(0, 2, 1, 3).reshape(p1 * q1, p2 * q2)
        u, s, vh = torch.linalg.svd(r, full_matrices=False)
        root = s[0].sqrt()
        a = (u[:, 0] * root).reshape(p1, q1)
        rest = (vh[0] * root).reshape(p2, q2)
        factors.append(a)
    factors.append(rest)
    approx = factors[0]
    for f in factors[1:]:
        approx = torch.kron(approx, f)
    denom = w64.norm().item()
    err = (w64 - approx).norm().item() / denom if denom > 0 else 0.0
    return [f.to(w.dtype) for f in factors], err


class KronLinear(nn.Module):
    """``y = x · (F1 ⊗ … ⊗ Fn) + b``: a linear layer whose weight is a Kronecker product.

    ``in_features = ∏ pᵢ`` and ``out_features = ∏ qᵢ`` for ``factor_shapes = [(p1, q1), …]``. The
    equivalent ``nn.Linear`` weight is ``(F1 ⊗ … ⊗ Fn)ᵀ`` (see :meth:`weight`). Parameters:
    ``factors`` (an ``nn.ParameterList``) and ``bias``.

    Initialisation matches ``nn.Linear``'s variance: each factor is uniform with variance
    ``(1 / (3·in_features))^(1/n)``, so every entry of the product has variance 1/(3·in_features)
    (the variance of ``nn.Linear``'s U(−1/√in, 1/√in)), and entries are uncorrelated, so outputs
    have ``nn.Linear``'s variance too. The bias is U(−1/√in, 1/√in) like ``nn.Linear``'s.
    """

    def __init__(self, factor_shapes, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.factor_shapes = _parse_shapes(factor_shapes)
        self.in_features = math.prod(p for p, _ in self.factor_shapes)
        self.out_features = math.prod(q for _, q in self.factor_shapes)
        self.factors = nn.ParameterList([nn.Parameter(torch.empty(p, q, **kw)) for p, q in self.factor_shapes])
        if bias:
            self.bias = nn.Parameter(torch.empty(self.out_features, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        n = len(self.factor_shapes)
        var = (1.0 / (3.0 * self.in_features)) ** (1.0 / n)
        bound = math.sqrt(3.0 * var)
        with torch.no_grad():
            for f in self.factors:
                f.uniform_(-bound, bound)
            if self.bias is not None:
                b = 1.0 / math.sqrt(self.in_features)
                self.bias.uniform_(-b, b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = kron_matmul(x, self.factors)
        if self.bias is None:
            return y
        bias, = autocast_args(x, self.bias)  # under torch.autocast in its dtype, as y (nn.Linear's output)
        return y + bias

    @property
    def weight(self) -> torch.Tensor:
        """The dense (out_features × in_features) weight an equivalent ``nn.Linear`` would hold
        (formed explicitly: for inspection and tests, not for the forward)."""
        k = self.factors[0]
        for f in list(self.factors)[1:]:
            k = torch.kron(k, f)
        return k.mT

    def extra_repr(self) -> str:
        shapes = ", ".join(f"{p}x{q}" for p, q in self.factor_shapes)
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"factors=[{shapes}], bias={self.bias is not None}")

    @classmethod
    def from_dense(cls, linear: nn.Linear, factor_shapes) -> "KronLinear":
        """The ``KronLinear`` nearest to ``linear`` (same bias; factors from
        :func:`nearest_kronecker` of its weight ``Wᵀ``). The relative Frobenius error of the weight
        approximation is stored in ``.approximation_error``.
        """
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"`linear` must be an nn.Linear; got {type(linear).__name__}")
        shapes = _parse_shapes(factor_shapes)
        P = math.prod(p for p, _ in shapes)
        Q = math.prod(q for _, q in shapes)
        if (linear.in_features, linear.out_features) != (P, Q):
            raise ValueError(
                f"`factor_shapes` {shapes} give a {P} → {Q} layer but `linear` is "
                f"{linear.in_features} → {linear.out_features}")
        w = linear.weight
        if w.is_meta:
            raise ValueError("KronLinear.from_dense: `linear` is on the meta device; its factors are computed from "
                             "the weight's values (an SVD), so load the weights first")
        mod = cls(shapes, bias=linear.bias is not None, device=w.device, dtype=w.dtype)
        factors, err = nearest_kronecker(w.detach().mT, shapes)
        with torch.no_grad():
            for dst, src in zip(mod.factors, factors):
                dst.copy_(src)
            if linear.bias is not None:
                mod.bias.copy_(linear.bias)
        mod.approximation_error = err
        return mod
