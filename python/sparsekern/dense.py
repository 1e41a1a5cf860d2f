"""Dense products through cuBLAS (CUDA) or libsparsekern's CPU kernel: matmul and a·bᵀ.

`matmul(a, b)` follows `torch.matmul` for inputs with at least two dims (batch dims broadcast);
`matmul_transb(a, b)` is `a @ b.transpose(-1, -2)`, the attention-score product Q·Kᵀ, computed
without copying the transposed operand. Both are `torch.library` custom ops
(`torch.ops.sparsekern.matmul`), so they trace under `torch.compile(fullgraph=True)`, and both are
differentiable (backward runs the same kernels on transposed views).
"""
from __future__ import annotations

import torch

from . import _C
from ._core import (traced, _HAS_CUDA_BACKEND, FLOAT_DTYPES, _raw_stream, _raw_to_dlpack, _to_dlpack, _workspaces,
                    autocast_args, refuse_forward_ad, special, check_backend, check_no_transform, check_same, check_tensor, cublas_workspace)

__all__ = ["matmul", "matmul_transb"]

_get_tf32 = torch._C._get_cublas_allow_tf32
_get_fp16_rr = torch._C._get_cublas_allow_fp16_reduced_precision_reduction
_get_bf16_rr = torch._C._get_cublas_allow_bf16_reduced_precision_reduction


def _allow_reduced_precision(dtype: torch.dtype) -> bool:
    v = _get_fp16_rr() if dtype == torch.float16 else _get_bf16_rr()
    return bool(v[0] if isinstance(v, tuple) else v)  # (allow, allow_splitk) in newer torch


_FLOAT = frozenset(FLOAT_DTYPES)


def _check_args(a, b, transb: bool):
    """Validate and return (m, k, n, batch_shape) of a · op(b).

    This runs on every call, so the common (valid) case costs a handful of attribute reads; the
    messages are only built on the failure path.
    """
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype in _FLOAT
            and b.dtype is a.dtype and a.dim() >= 2 and b.dim() >= 2
            and a.get_device() == b.get_device() and (a.is_cpu or a.is_cuda or a.is_meta)):
        check_tensor("a", a, min_dim=2)
        check_tensor("b", b, min_dim=2)
        check_same("b", b, "a", a)
        check_backend("a", a)
    if a.is_cuda and not _HAS_CUDA_BACKEND:
        check_backend("a", a)
    sa, sb = a.shape, b.shape
    m, k = sa[-2], sa[-1]
    if transb:
        n, kb = sb[-2], sb[-1]
        if kb != k:
            raise ValueError(
                f"`b` must have {k} columns (the last dim of `a`) for a·bᵀ; got shape {tuple(sb)}")
    else:
        kb, n = sb[-2], sb[-1]
        if kb != k:
            raise ValueError(
                f"`b` must have {k} rows (the last dim of `a`) for a·b; got shape {tuple(sb)}")
    batch_a, batch_b = sa[:-2], sb[:-2]
    if batch_a == batch_b or not batch_b:  # the common cases, without broadcast_shapes' cost
        return m, k, n, batch_a
    if not batch_a:
        return m, k, n, batch_b
    try:
        batch = torch.broadcast_shapes(batch_a, batch_b)
    except RuntimeError:
        raise ValueError(
            f"batch dims of `a` {tuple(batch_a)} and `b` {tuple(batch_b)} do not broadcast") from None
    return m, k, n, batch


def _blas_ready(t: torch.Tensor) -> torch.Tensor:
    """cuBLAS needs a unit stride along one of the two matrix dims; copy only when there is none."""
    if t.is_contiguous():
        return t
    rows, cols = t.shape[-2], t.shape[-1]
    rs, cs = t.stride(-2), t.stride(-1)
    if (cs == 1 or cols <= 1) and (rs >= max(cols, 1) or rows <= 1):
        return t
    if (rs == 1 or rows <= 1) and (cs >= max(rows, 1) or cols <= 1):
        return t
    return t.contiguous()


def _as_batch(t: torch.Tensor, batch: torch.Size, rows: int, cols: int) -> torch.Tensor:
    """2-D stays 2-D (broadcast by a zero batch stride in the kernel); else (B, rows, cols) view."""
    if t.dim() == 2:
        return t
    if t.shape[:-2] != batch:
        t = t.expand(*batch, rows, cols)
    return t.reshape(-1, rows, cols)  # a view whenever the batch dims merge, a copy otherwise


def _gemm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, transb: bool, transa: bool = False) -> None:
    """out ← op(a)·op(b), op(x) = xᵀ when `transx` (the kernel swaps the strides: no copy).

    Host hot path (a launch-bound product costs about as much here as on the GPU): locals only, one
    cache lookup for the stream's workspace, capsules instead of __dlpack__.
    """
    dtype = a.dtype
    if a.is_cuda:
        dev = a.get_device()
        stream = _raw_stream(dev)
        ws = _workspaces.get((dev, stream)) or cublas_workspace(a, stream)
        ws_ptr, ws_bytes = ws[0], ws[1]
    else:
        stream = ws_ptr = ws_bytes = 0
    _C.gemm(_to_dlpack(a), _to_dlpack(b), _raw_to_dlpack(out), 1.0, 0.0, transa, transb,
            dtype is torch.float32 and _get_tf32(),
            (dtype is torch.float16 or dtype is torch.bfloat16) and _allow_reduced_precision(dtype),
            ws_ptr, ws_bytes, stream)


def _forward(a: torch.Tensor, b: torch.Tensor, transb: bool) -> torch.Tensor:
    m, k, n, batch = _check_args(a, b, transb)
    out = a.new_empty((*batch, m, n) if batch else (m, n))
    if k == 0 or out.numel() == 0:
        return out.zero_()
    a = _blas_ready(a)
    b = _blas_ready(b)
    if not batch:
        _gemm(a, b, out, transb)
        return out
    # Kernel-side shapes of b: (k, n) after the optional transpose, stored as (n, k) when transb.
    b_rows, b_cols = (n, k) if transb else (k, n)
    if b.dim() == 2:
        # (..., m, k) · (k, n): fold the batch into the rows, one large GEMM (what torch does).
        try:
            a2 = a.view(-1, k)
        except RuntimeError:
            a2 = None
        if a2 is not None:
            _gemm(a2, b, out.view(-1, n), transb)
            return out
    _gemm(_as_batch(a, batch, m, k), _as_batch(b, batch, b_rows, b_cols), out.view(-1, m, n), transb)
    return out


# --------------------------------------------------------------------------------------------
# Custom op + autograd
# --------------------------------------------------------------------------------------------
@torch.library.custom_op("sparsekern::matmul", mutates_args=())
def _matmul_op(a: torch.Tensor, b: torch.Tensor, transb: bool) -> torch.Tensor:
    refuse_forward_ad("matmul")
    return _forward(a, b, transb)


@_matmul_op.register_fake
def _(a, b, transb):
    m, _, n, batch = _check_args(a, b, transb)
    return a.new_empty((*batch, m, n))


def _sum_to(g: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    return g if g.shape == shape else g.sum_to_size(shape)


def _setup_context(ctx, inputs, output):
    a, b, transb = inputs
    ctx.save_for_backward(a, b)
    ctx.transb = transb


def _backward(ctx, grad, mm=None):
    """Gradients of out = a·B, B = bᵀ (transb) or b, from the same kernels on transposed views.

    `mm` runs the products: the custom op when traced (torch.compile / AOT autograd), `_dispatch`
    in eager mode, so a plain backward takes the fast path and create_graph=True records again.
    """
    mm = mm or _matmul_op
    a, b = ctx.saved_tensors
    transb = ctx.transb
    ga = gb = None
    if ctx.needs_input_grad[0]:
        # dA = grad · Bᵀ: Bᵀ is b itself when transb, else b read transposed (no copy).
        ga = _sum_to(mm(grad, b, not transb), a.shape)
    if ctx.needs_input_grad[1]:
        k = a.shape[-1]
        n = grad.shape[-1]
        if b.dim() == 2 and a.dim() > 2:
            # b was shared by every batch entry: one GEMM over the folded rows, not a batched sum.
            a2, g2 = a.reshape(-1, k), grad.reshape(-1, n)
        else:
            a2, g2 = a, grad
        # dB = aᵀ·grad (k × n); for a·bᵀ, dB = gradᵀ·a = (aᵀ·grad)ᵀ: the k × n product is the shape
        # cuBLAS runs fastest for attention (k = head dim ≪ n), and the one torch computes.
        gb = mm(a2.transpose(-1, -2), g2, False)
        if transb:
            gb = gb.transpose(-1, -2)
        gb = _sum_to(gb, b.shape)
    return ga, gb, None


_matmul_op.register_autograd(_backward, setup_context=_setup_context)


class _MatmulFunction(torch.autograd.Function):
    """Eager autograd without the custom-op dispatch: the custom op is for tracing (torch.compile);
    in eager mode its extra host cost per call showed as a 1.3-1.6x slower attention backward."""

    @staticmethod
    def forward(ctx, a, b, transb):
        ctx.save_for_backward(a, b)
        ctx.transb = transb
        return _forward(a, b, transb)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        # (traced: compiled autograd over an eager forward traces this backward; the custom ops then)
        if (not _grad_enabled() and not traced() and a.shape[:-2] == b.shape[:-2] and a.dim() <= 3
                and grad.is_contiguous()):
            return _backward_same_batch(a, b, grad, ctx.transb, ctx.needs_input_grad)
        return _backward(ctx, grad, _dispatch)


def _backward_same_batch(a, b, grad, transb, needs):
    """Backward of a 2-D or 3-D product without broadcasting, straight to the kernel: in attention
    the GEMMs are short enough that the host work of the general path (checks, views, dispatch)
    left the GPU idle and made the backward 1.2x torch's (H200, fp16/bf16 Q·Kᵀ)."""
    ga = gb = None
    a, b = _blas_ready(a), _blas_ready(b)
    if needs[0]:
        ga = a.new_empty(a.shape)
        _gemm(grad, b, ga, not transb)            # dA = grad · Bᵀ (B = bᵀ when transb)
    if needs[1]:
        k, n = a.shape[-1], grad.shape[-1]
        gb = b.new_empty((*b.shape[:-2], k, n))
        _gemm(a, grad, gb, False, transa=True)   # aᵀ · grad  (k × n)
        if transb:
            gb = gb.transpose(-1, -2)              # dB = (aᵀ·grad)ᵀ, as torch lays it out
    return ga, gb, None


_grad_enabled = torch.is_grad_enabled


def _dispatch(a, b, transb: bool):
    check_no_transform("matmul_transb" if transb else "matmul", a, b)
    if isinstance(a, torch.Tensor):  # under torch.autocast: both operands in its dtype, as torch.matmul
        a, b = autocast_args(a, a, b)
    if traced() or special(a, b):
        return _matmul_op(a, b, transb)  # (meta / fake tensors: the op's fake implementation gives the result)
    if _grad_enabled() and (getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False)):
        return _MatmulFunction.apply(a, b, transb)
    return _forward(a, b, transb)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for tensors with ≥ 2 dims (batch dims broadcast like ``torch.matmul``).

    fp64, fp32 (TF32 tensor cores exactly when ``torch.backends.cuda.matmul.allow_tf32``), fp16 and
    bf16; CPU or CUDA (on torch's current stream). Differentiable in both operands.
    """
    return _dispatch(a, b, False)


def matmul_transb(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b.transpose(-1, -2)``: the attention-score product Q·Kᵀ, with no copy of ``b``.

    Same dtypes, devices, broadcasting and autograd as :func:`matmul`.
    """
    return _dispatch(a, b, True)
