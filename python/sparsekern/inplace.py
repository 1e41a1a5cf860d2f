"""In-place ops for memory-lean inference: each overwrites its input instead of allocating an output.

    inplace_softmax(x, dim=-1)                   x ← softmax(x)             (differentiable)
    inplace_softmax_backward(grad, y, dim=-1)    grad ← y·(grad − Σ grad·y)
    inplace_layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5)
    inplace_rms_norm(x, normalized_shape, weight=None, eps=None)
    square_matmul(x, w, transpose_w=False)       x ← x·w (or x·wᵀ)          (differentiable in x)
    inplace_linear(x, linear)                    x ← linear(x), square nn.Linear

All return `x` itself (same storage, same data_ptr). Extra device memory: none for the row-wise ops;
for square_matmul a panel workspace of at most max(2% of x, 64 MiB) (`square_matmul_workspace_size`).
fp32, fp16, bf16 (and fp64), CPU or CUDA (on torch's current stream).

Autograd: the softmax backward needs only its output, so `inplace_softmax` works under autograd
(`ctx.mark_dirty`); `square_matmul` too while `w` needs no gradient (dx needs only w). LayerNorm,
RMSNorm and a square_matmul whose `w` needs a gradient would need the input they overwrite: they raise
and name the out-of-place torch op to use instead. Every check runs before anything is written, so a
refused call leaves its input unchanged.
"""
from __future__ import annotations

import numbers

import torch

from . import _C
from ._core import (jit_tracing, traced, as_dlpack, check_backend, check_no_transform, check_same, check_tensor, cublas_workspace,
                    refuse_forward_ad, special, stream_of)
from .dense import _allow_reduced_precision, _blas_ready, _get_tf32

try:
    from torch._subclasses.fake_tensor import is_fake as _is_fake
except ImportError:  # pragma: no cover - older torch
    def _is_fake(t) -> bool:
        return False

__all__ = [
    "inplace_softmax", "inplace_softmax_backward", "inplace_layer_norm", "inplace_rms_norm",
    "square_matmul", "inplace_linear", "square_matmul_workspace_size",
]

_DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2, torch.float64: 3}


# --------------------------------------------------------------------------------------------
# Argument checks (shared by the real and the fake implementations, so both raise alike)
# --------------------------------------------------------------------------------------------
def _grad_needed(*ts) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in ts)


def _check_overwritable(name: str, t: torch.Tensor) -> None:
    """`t` is about to be overwritten: refuse layouts where that is unsafe or torch forbids it."""
    if t.is_neg() or t.is_conj():
        # The native module sees the storage without the bit, and a resolved copy would take the write.
        raise ValueError(
            f"`{name}` is a lazily negated or conjugated view (Tensor.is_neg() / is_conj()); it cannot be "
            f"overwritten in place: pass `{name}.resolve_neg()` (a copy) and use the result")
    if t.is_inference() and not torch.is_inference_mode_enabled():
        raise RuntimeError(
            f"`{name}` is an inference tensor: an in-place update of it outside torch.inference_mode() is not "
            "allowed (torch's rule for its own in-place ops)")
    if torch.is_grad_enabled() and t.requires_grad:
        base = t._base if t._is_view() else None
        if t.is_leaf or (base is not None and base.is_leaf and base.requires_grad):
            raise RuntimeError(
                f"`{name}` is a leaf tensor that requires grad (or a view of one): it cannot be overwritten in "
                f"place (autograd needs its value); pass a non-leaf (e.g. `{name}.clone()`), or call under "
                f"torch.no_grad()")
    if t.device.type != "meta" and torch._debug_has_internal_overlap(t) == 1:
        raise ValueError(
            f"`{name}` has elements that share memory (e.g. an expanded tensor); it cannot be overwritten in place")


def _byte_range(t: torch.Tensor):
    """[first, last) byte addresses `t` touches, or None when unknown (fake tensors) or empty."""
    if t.numel() == 0 or t.device.type == "meta" or _is_fake(t):
        return None
    try:
        start = t.data_ptr()
    except (RuntimeError, NotImplementedError):  # other tensor subclasses without an address
        return None
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    return start, start + span * t.element_size()


def _check_no_overlap(name: str, t: torch.Tensor, ref_name: str, ref: torch.Tensor) -> None:
    a, b = _byte_range(t), _byte_range(ref)
    if a is not None and b is not None and a[0] < b[1] and b[0] < a[1]:
        raise ValueError(f"`{name}` must not share memory with `{ref_name}` ({ref_name} is overwritten while "
                         f"{name} is read)")


def _norm_dim(name: str, t: torch.Tensor, dim) -> int:
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise TypeError(f"`dim` must be an int; got {type(dim).__name__}")
    nd = max(t.dim(), 1)
    if not -nd <= dim < nd:
        raise ValueError(f"`dim` {dim} is out of range for `{name}` with {t.dim()} dims")
    return int(dim) % nd if t.dim() else 0


def _check_softmax(x, dim) -> int:
    check_tensor("x", x)
    check_backend("x", x)
    d = _norm_dim("x", x, dim)
    _check_overwritable("x", x)
    return d


def _check_softmax_backward(grad, y, dim) -> int:
    check_tensor("grad", grad)
    check_tensor("y", y)
    check_same("y", y, "grad", grad)
    check_backend("grad", grad)
    if y.shape != grad.shape:
        raise ValueError(f"`y` must have the shape of `grad` {tuple(grad.shape)}; got {tuple(y.shape)}")
    d = _norm_dim("grad", grad, dim)
    _check_overwritable("grad", grad)
    _check_no_overlap("y", y, "grad", grad)
    return d


def _check_norm(x, normalized_shape, weight, bias, eps):
    """Returns (normalized_ndim, weight, bias) with weight/bias made contiguous (they are small)."""
    check_tensor("x", x)
    check_backend("x", x)
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (int(normalized_shape),)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or k > x.dim() or tuple(x.shape[x.dim() - k:]) != normalized_shape:
        raise ValueError(f"`normalized_shape` {normalized_shape} must be the trailing dims of `x` "
                         f"{tuple(x.shape)}")
    expect = 1
    for size, stride in zip(reversed(x.shape[x.dim() - k:]), reversed(x.stride()[x.dim() - k:])):
        if size > 1 and stride != expect:
            raise ValueError(f"`x` must be contiguous over its last {k} dim(s) (the normalised dims); got strides "
                             f"{tuple(x.stride())} for shape {tuple(x.shape)}")
        expect *= size
    if not isinstance(eps, numbers.Real) or not eps >= 0 or eps == float("inf"):
        raise ValueError(f"`eps` must be a finite number >= 0; got {eps!r}")
    out = []
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            check_tensor(name, t)
            check_same(name, t, "x", x)
            if tuple(t.shape) != normalized_shape:
                raise ValueError(f"`{name}` must have shape {normalized_shape} (normalized_shape); got "
                                 f"{tuple(t.shape)}")
            _check_no_overlap(name, t, "x", x)
            t = t.contiguous()
        out.append(t)
    _check_overwritable("x", x)
    return k, out[0], out[1]


def _inference_only(op: str, torch_op: str, *named) -> None:
    for name, t in named:
        if t is not None and torch.is_grad_enabled() and t.requires_grad:
            raise RuntimeError(
                f"{op}: `{name}` requires grad, but the in-place form is for inference: its backward would "
                f"need the input it overwrites. Call it under torch.no_grad()/torch.inference_mode(), or use "
                f"{torch_op} when training")


def _check_square(x, w, bias=None, workspace=None):
    check_tensor("x", x, min_dim=1)
    check_tensor("w", w)
    check_same("w", w, "x", x)
    check_backend("x", x)
    if w.dim() != 2:
        raise ValueError(f"`w` must be a 2-D square matrix; got {w.dim()}-D shape {tuple(w.shape)}")
    n = x.shape[-1]
    if w.shape[0] != w.shape[1] or w.shape[0] != n:
        raise ValueError(f"`w` must be square {n}x{n} (the last dim of `x`); got shape {tuple(w.shape)}")
    if n > 1 and x.stride(-1) != 1:
        raise ValueError(f"`x` must have a unit stride along its last dim (a non-contiguous last dim cannot feed "
                         f"the GEMM); got strides {tuple(x.stride())}")
    if bias is not None:
        check_tensor("bias", bias)
        check_same("bias", bias, "x", x)
        if tuple(bias.shape) != (n,):
            raise ValueError(f"`bias` must have shape ({n},); got {tuple(bias.shape)}")
        _check_no_overlap("bias", bias, "x", x)
    _check_no_overlap("w", w, "x", x)
    if workspace is not None:
        if not isinstance(workspace, torch.Tensor):
            raise TypeError(f"`workspace` must be a torch.Tensor; got {type(workspace).__name__}")
        if workspace.device != x.device:
            raise ValueError(f"`workspace` must be on the device of `x` ({x.device}); got {workspace.device}")
        row_bytes = n * x.element_size()
        if not workspace.is_contiguous() or (x.numel() and workspace.numel() * workspace.element_size() < row_bytes):
            raise ValueError(f"`workspace` must be contiguous and hold at least one row of `x` ({row_bytes} bytes; "
                             f"square_matmul_workspace_size(x) is the recommended size); got "
                             f"{workspace.numel() * workspace.element_size()} bytes")
        _check_no_overlap("workspace", workspace, "x", x)
        _check_no_overlap("workspace", workspace, "w", w)
    _check_overwritable("x", x)


# --------------------------------------------------------------------------------------------
# Implementations (call the native library on torch's current stream)
# --------------------------------------------------------------------------------------------
def _softmax_impl(x: torch.Tensor, dim: int) -> None:
    _C.inplace_softmax(as_dlpack(x), dim, stream_of(x))


def _softmax_backward_impl(grad: torch.Tensor, y: torch.Tensor, dim: int) -> None:
    _C.inplace_softmax_backward(as_dlpack(grad), as_dlpack(y), dim, stream_of(grad))


def _dl(t):
    return None if t is None else as_dlpack(t)


def _layer_norm_impl(x, k, weight, bias, eps) -> None:
    _C.inplace_layer_norm(as_dlpack(x), k, _dl(weight), _dl(bias), float(eps), stream_of(x))


def _rms_norm_impl(x, k, weight, eps) -> None:
    _C.inplace_rms_norm(as_dlpack(x), k, _dl(weight), float(eps), stream_of(x))


def square_matmul_workspace_size(x: torch.Tensor) -> int:
    """Bytes of the panel workspace :func:`square_matmul` allocates for `x` (..., n): whole rows, at most
    max(2% of x, 64 MiB), never more than x itself."""
    n = x.shape[-1] if x.dim() else 1
    rows = x.numel() // n if n else 0
    return int(_C.square_matmul_workspace_size(_DTYPE_CODE[x.dtype], rows, n))


def _square_matmul_impl(x, w, transpose_w, bias, workspace=None) -> None:
    if x.numel() == 0:
        return
    stream = stream_of(x)
    dtype = x.dtype
    ws = workspace if workspace is not None else \
        torch.empty(square_matmul_workspace_size(x), dtype=torch.uint8, device=x.device)
    w = _blas_ready(w)  # cuBLAS needs a unit stride along one dim of w: copy (n×n, small) only if none
    if bias is not None:
        bias = bias.contiguous()
    blas_ptr, blas_bytes = cublas_workspace(x, stream)[:2] if x.is_cuda else (0, 0)
    _C.square_matmul(as_dlpack(x), as_dlpack(w), bool(transpose_w), _dl(bias),
                     dtype == torch.float32 and _get_tf32(),
                     dtype in (torch.float16, torch.bfloat16) and _allow_reduced_precision(dtype),
                     as_dlpack(ws), blas_ptr, blas_bytes, stream)


# --------------------------------------------------------------------------------------------
# Custom ops: mutate their first argument, return nothing (torch.compile functionalises them)
# --------------------------------------------------------------------------------------------
@torch.library.custom_op("sparsekern::inplace_softmax", mutates_args=("x",))
def _softmax_op(x: torch.Tensor, dim: int) -> None:
    refuse_forward_ad("inplace_softmax")
    _softmax_impl(x, _check_softmax(x, dim))


@_softmax_op.register_fake
def _(x, dim):
    _check_softmax(x, dim)


@torch.library.custom_op("sparsekern::inplace_softmax_backward", mutates_args=("grad",))
def _softmax_backward_op(grad: torch.Tensor, y: torch.Tensor, dim: int) -> None:
    refuse_forward_ad("inplace_softmax_backward")
    _softmax_backward_impl(grad, y, _check_softmax_backward(grad, y, dim))


@_softmax_backward_op.register_fake
def _(grad, y, dim):
    _check_softmax_backward(grad, y, dim)


@torch.library.custom_op("sparsekern::inplace_layer_norm", mutates_args=("x",))
def _layer_norm_op(x: torch.Tensor, normalized_shape: list[int], weight: torch.Tensor | None,
                   bias: torch.Tensor | None, eps: float) -> None:
    refuse_forward_ad("inplace_layer_norm")
    k, weight, bias = _check_norm(x, normalized_shape, weight, bias, eps)
    _layer_norm_impl(x, k, weight, bias, eps)


@_layer_norm_op.register_fake
def _(x, normalized_shape, weight, bias, eps):
    _check_norm(x, normalized_shape, weight, bias, eps)


@torch.library.custom_op("sparsekern::inplace_rms_norm", mutates_args=("x",))
def _rms_norm_op(x: torch.Tensor, normalized_shape: list[int], weight: torch.Tensor | None, eps: float) -> None:
    refuse_forward_ad("inplace_rms_norm")
    k, weight, _ = _check_norm(x, normalized_shape, weight, None, eps)
    _rms_norm_impl(x, k, weight, eps)


@_rms_norm_op.register_fake
def _(x, normalized_shape, weight, eps):
    _check_norm(x, normalized_shape, weight, None, eps)


@torch.library.custom_op("sparsekern::square_matmul", mutates_args=("x", "workspace"))
def _square_matmul_op(x: torch.Tensor, w: torch.Tensor, transpose_w: bool, bias: torch.Tensor | None,
                      workspace: torch.Tensor | None) -> None:
    refuse_forward_ad("square_matmul")
    _check_square(x, w, bias, workspace)
    _square_matmul_impl(x, w, transpose_w, bias, workspace)


@_square_matmul_op.register_fake
def _(x, w, transpose_w, bias, workspace):
    _check_square(x, w, bias, workspace)


# --------------------------------------------------------------------------------------------
# Autograd: in-place Functions that mark their input dirty and return it
# --------------------------------------------------------------------------------------------
class _InplaceSoftmax(torch.autograd.Function):
    """y = softmax(x) written over x; dx = y·(dy − Σ dy·y) needs only y, which is what x now holds."""

    @staticmethod
    def forward(ctx, x, dim):
        _softmax_op(x, dim)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        ctx.dim = dim
        return x

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: torch's ops, so that a second backward sees them
            return y * (grad - (grad * y).sum(ctx.dim, keepdim=True)), None
        gx = torch.empty_like(y)  # y's layout: the two then share one row mapping in the kernel
        gx.copy_(grad)
        _softmax_backward_op(gx, y, ctx.dim)
        return gx, None


class _InplaceSquareMatmul(torch.autograd.Function):
    """x ← x·op(w) + bias with w and bias constant: dx = dy·op(w)ᵀ needs only w."""

    @staticmethod
    def forward(ctx, x, w, transpose_w, bias, workspace):
        _square_matmul_op(x, w, transpose_w, bias, workspace)
        ctx.mark_dirty(x)
        ctx.save_for_backward(w)
        ctx.transpose_w = transpose_w
        return x

    @staticmethod
    def backward(ctx, grad):
        (w,) = ctx.saved_tensors
        # x·w → dx = dy·wᵀ;  x·wᵀ → dx = dy·w
        gx = grad @ (w if ctx.transpose_w else w.mT)
        return gx, None, None, None, None


def _use_op(t=None) -> bool:
    """Go through the dispatcher only when tracing needs it (or for meta tensors, which its fake
    implementation handles); else call the library directly."""
    return traced() or special(t)


def _masked_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """torch.softmax with this package's rule for a row that is entirely -inf: zeros, not NaN."""
    masked = x.amax(dim, keepdim=True) == float("-inf")
    y = torch.softmax(torch.where(masked, torch.zeros_like(x), x), dim)  # finite there: no NaN gradient
    return torch.where(masked, torch.zeros_like(y), y)


_is_exporting = getattr(torch.compiler, "is_exporting", lambda: False)


def _recorded_functionally() -> bool:
    """Whether the call is being recorded by torch.jit.trace or torch.export. Both record the
    in-place ops as torch's op copied back (differentiable), not as the mutating custom ops: those
    have no autograd formula (torch accepts none for a mutating op), so an exported graph replayed
    on inputs that need a gradient passed it through them as the identity; and jit.trace checks
    its trace by running it again under no_grad, which must record the same graph."""
    return jit_tracing() or _is_exporting()


_bump = torch.autograd.graph.increment_version


def _written(t: torch.Tensor) -> None:
    """After a direct (eager) write: bump `t`'s version counter as torch's in-place ops do, so that
    autograd refuses a graph that saved `t` before it was overwritten (it used the new values)."""
    if isinstance(t, torch.Tensor):
        _bump(t)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------
def inplace_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``x ← softmax(x, dim)`` in place; returns `x`.

    Any leading shape, rows of 1 to 256K+ elements, fp32/fp16/bf16/fp64, accumulation in fp32.
    Numerically stable: large logits are fine, −inf entries (masks) get probability 0, and a row that
    is entirely −inf becomes all zeros (torch gives NaN there). Differentiable: under autograd the
    input must be a non-leaf, and the backward uses only the output.
    """
    check_no_transform("inplace_softmax", x)
    if isinstance(x, torch.Tensor) and (_grad_needed(x) or _recorded_functionally()):
        if _use_op(x):
            # Traced with autograd: torch's softmax copied back (the Function's mark_dirty and the
            # mutating op did not survive AOT autograd: the gradient came out as the identity).
            return x.copy_(_masked_softmax(x, dim))
        return _InplaceSoftmax.apply(x, _check_softmax(x, dim))
    if _use_op(x):
        _softmax_op(x, dim)
    else:
        _softmax_impl(x, _check_softmax(x, dim))
        _written(x)
    return x


def inplace_softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``grad ← y · (grad − Σ_dim grad·y)``: turns dL/dy into dL/dx of ``y = softmax(x, dim)`` in place,
    from the output `y` alone; returns `grad`. `grad` and `y` must not share memory. Not differentiable
    itself (no double backward)."""
    check_no_transform("inplace_softmax_backward", grad, y)
    if isinstance(grad, torch.Tensor) and isinstance(y, torch.Tensor):
        _inference_only("inplace_softmax_backward", "torch.ops.aten._softmax_backward_data", ("grad", grad), ("y", y))
    if _use_op(grad):
        _softmax_backward_op(grad, y, dim)
    else:
        _softmax_backward_impl(grad, y, _check_softmax_backward(grad, y, dim))
        _written(grad)
    return grad


def inplace_layer_norm(x: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None,
                       bias: torch.Tensor | None = None, eps: float = 1e-5) -> torch.Tensor:
    """``x ← layer_norm(x, normalized_shape, weight, bias, eps)`` in place, the affine in the same pass;
    returns `x`. `x` must be contiguous over the normalised (trailing) dims; weight/bias have
    `normalized_shape` and x's dtype. Inference only (raises if anything requires grad under autograd).
    """
    check_no_transform("inplace_layer_norm", x, weight, bias)
    if isinstance(x, torch.Tensor):
        _inference_only("inplace_layer_norm", "torch.nn.functional.layer_norm",
                        ("x", x), ("weight", weight), ("bias", bias))
    if _use_op(x):
        shape = [normalized_shape] if isinstance(normalized_shape, numbers.Integral) else list(normalized_shape)
        if _recorded_functionally() and isinstance(x, torch.Tensor):  # see _recorded_functionally
            return x.copy_(torch.nn.functional.layer_norm(x.clone(), shape, weight, bias, float(eps)))  # (its backward reads x)
        _layer_norm_op(x, shape, weight, bias, float(eps))
        return x
    k, weight, bias = _check_norm(x, normalized_shape, weight, bias, eps)
    _layer_norm_impl(x, k, weight, bias, eps)
    _written(x)
    return x


def inplace_rms_norm(x: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None,
                     eps: float | None = None) -> torch.Tensor:
    """``x ← rms_norm(x, normalized_shape, weight, eps)`` in place (``x / sqrt(mean(x²) + eps) · weight``);
    returns `x`. `eps=None` means torch.nn.functional.rms_norm's default: ``torch.finfo`` eps of x's dtype
    for fp32 / fp64 and of fp32 for fp16 / bf16 (the type torch computes in).
    Inference only, like :func:`inplace_layer_norm`."""
    check_no_transform("inplace_rms_norm", x, weight)
    if isinstance(x, torch.Tensor):
        _inference_only("inplace_rms_norm", "torch.nn.functional.rms_norm", ("x", x), ("weight", weight))
        if eps is None and x.dtype in _DTYPE_CODE:  # torch's default: the eps of the math type (fp32 for 16-bit)
            eps = torch.finfo(x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32).eps
    if _use_op(x):
        shape = [normalized_shape] if isinstance(normalized_shape, numbers.Integral) else list(normalized_shape)
        if _recorded_functionally() and isinstance(x, torch.Tensor) and hasattr(torch.nn.functional, "rms_norm"):
            return x.copy_(torch.nn.functional.rms_norm(x.clone(), shape, weight, float(eps)))
        _rms_norm_op(x, shape, weight, float(eps))
        return x
    k, weight, _ = _check_norm(x, normalized_shape, weight, None, eps)
    _rms_norm_impl(x, k, weight, eps)
    _written(x)
    return x


def _square_matmul(x, w, transpose_w, bias, workspace, op_name):
    check_no_transform(op_name, x, w, bias, workspace)
    if isinstance(x, torch.Tensor) and isinstance(w, torch.Tensor):
        _inference_only(op_name, "torch.matmul / torch.nn.functional.linear", ("w", w), ("bias", bias))
        if _grad_needed(x) or _recorded_functionally():
            if _use_op(x):  # traced with autograd: torch's product copied back (see inplace_softmax)
                y = torch.matmul(x, w.mT if transpose_w else w)
                return x.copy_(y if bias is None else y + bias)
            _check_square(x, w, bias, workspace)
            return _InplaceSquareMatmul.apply(x, w, bool(transpose_w), bias, workspace)
    if _use_op(x):
        _square_matmul_op(x, w, bool(transpose_w), bias, workspace)
    else:
        _check_square(x, w, bias, workspace)
        _square_matmul_impl(x, w, transpose_w, bias, workspace)
        _written(x)
    return x


def square_matmul(x: torch.Tensor, w: torch.Tensor, transpose_w: bool = False, *,
                  workspace: torch.Tensor | None = None) -> torch.Tensor:
    """``x ← x · w`` (or ``x · wᵀ``) in place for `x` of shape (..., n) and `w` (n, n); returns `x`.

    Runs one panel of rows at a time: each panel's product goes to a workspace of at most
    max(2% of x, 64 MiB) (:func:`square_matmul_workspace_size`), then is copied back over the panel,
    so no full-size output is ever allocated. fp32 (TF32 exactly when
    ``torch.backends.cuda.matmul.allow_tf32``), fp16, bf16, fp64. `w` must not share memory with `x`
    and x's last dim must be contiguous. Differentiable in `x` while `w` needs no gradient.

    `workspace`: optional caller buffer (any dtype, contiguous, on x's device, at least one row of x)
    used instead of allocating one; panels are as many whole rows as it holds. Passing one buffer to
    many calls makes them allocation-free, and a smaller one trades speed for memory.
    """
    return _square_matmul(x, w, transpose_w, None, workspace, "square_matmul")


def inplace_linear(x: torch.Tensor, linear: torch.nn.Linear, *, workspace: torch.Tensor | None = None) -> torch.Tensor:
    """``x ← linear(x) = x · Wᵀ + b`` in place for a square ``nn.Linear`` (in_features == out_features);
    the bias is added while the product is copied back. Returns `x`. Inference only for the layer's
    parameters (use it under torch.no_grad() / torch.inference_mode()). `workspace` as in square_matmul."""
    if not isinstance(linear, torch.nn.Linear):
        raise TypeError(f"`linear` must be a torch.nn.Linear; got {type(linear).__name__}")
    if linear.in_features != linear.out_features:
        raise ValueError(f"`linear` must be square (in_features == out_features) to run in place; got "
                         f"{linear.in_features} -> {linear.out_features}")
    if isinstance(x, torch.Tensor):  # named after the layer: `w` and its shape are not the caller's words
        if x.dim() == 0 or x.shape[-1] != linear.in_features:
            raise ValueError(f"`x` must have {linear.in_features} features in its last dim (the layer's "
                             f"in_features); got shape {tuple(x.shape)}")
        if linear.weight.dtype != x.dtype or linear.weight.device != x.device:
            raise TypeError(f"`linear` must have the dtype and device of `x` ({x.dtype}, {x.device}); got "
                            f"{linear.weight.dtype}, {linear.weight.device}")
    return _square_matmul(x, linear.weight, True, linear.bias, workspace, "inplace_linear")
