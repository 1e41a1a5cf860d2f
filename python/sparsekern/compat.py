"""Names kept from the cuBLAS/cuSPARSE seed, for code migrating to sparsekern.

    from sparsekern.compat import cublasMM, cublasTransbMM, init_cublas, destroy_cublas
    c = cublasMM.apply(a, b)          # == sparsekern.matmul(a, b)
    s = cublasTransbMM.apply(q, k)    # == sparsekern.matmul_transb(q, k)

From the in-place seed:

    square_matmul(a, b, n_rows, n_cols)   # a (n_rows × n_cols) ← a · b in place, b n_cols × n_cols

`init_cublas()` / `destroy_cublas()` are optional: handles are created lazily per (device, thread)
and released at exit; both calls are safe in any order, any number of times, or not at all.
"""
from __future__ import annotations

import torch

from . import _C, _core
from .dense import matmul, matmul_transb
from .inplace import square_matmul as _square_matmul

__all__ = ["cublasMM", "cublasTransbMM", "init_cublas", "destroy_cublas", "square_matmul"]


class cublasMM(torch.autograd.Function):  # noqa: N801 - seed's name
    """Seed-compatible ``cublasMM.apply(a, b)`` = ``a @ b`` (differentiable)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return matmul(a.detach(), b.detach())

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ga = matmul_transb(grad, b) if ctx.needs_input_grad[0] else None
        gb = matmul(a.transpose(-1, -2), grad) if ctx.needs_input_grad[1] else None
        if ga is not None and ga.shape != a.shape:
            ga = ga.sum_to_size(a.shape)
        if gb is not None and gb.shape != b.shape:
            gb = gb.sum_to_size(b.shape)
        return ga, gb


class cublasTransbMM(torch.autograd.Function):  # noqa: N801 - seed's name
    """Seed-compatible ``cublasTransbMM.apply(a, b)`` = ``a @ b.transpose(-1, -2)``."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return matmul_transb(a.detach(), b.detach())

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ga = matmul(grad, b) if ctx.needs_input_grad[0] else None
        gb = matmul(grad.transpose(-1, -2), a) if ctx.needs_input_grad[1] else None
        if ga is not None and ga.shape != a.shape:
            ga = ga.sum_to_size(a.shape)
        if gb is not None and gb.shape != b.shape:
            gb = gb.sum_to_size(b.shape)
        return ga, gb


def init_cublas(device=None) -> None:
    """Create this thread's cuBLAS handle now (optional). No-op without a CUDA device."""
    if not _C.built_with_cuda() or _C.cuda_device_count() == 0:
        return
    index = torch.device(device).index if device is not None else None
    if index is None:
        index = torch.cuda.current_device()
    _C.init_cublas(index)


def destroy_cublas() -> None:
    """Release every cuBLAS/cuSPARSE handle and cached workspace (optional; later ops recreate).
    A CUDA graph captured before the call may have recorded those workspaces (the cuBLAS scratch
    and the block-sparse tile counter of its stream): do not replay it afterwards."""
    _core.release_workspaces()
    _C.destroy_handles()


def square_matmul(a: torch.Tensor, b: torch.Tensor, n_rows: int, n_cols: int) -> torch.Tensor:
    """Seed-compatible ``square_matmul(a, b, n_rows, n_cols)``: `a` holds an n_rows × n_cols matrix
    (any shape with that many elements, contiguous), overwritten by ``a · b`` with `b` n_cols × n_cols.
    Returns `a`. Same as ``sparsekern.square_matmul(a.view(n_rows, n_cols), b)``."""
    if not isinstance(a, torch.Tensor):
        raise TypeError(f"`a` must be a torch.Tensor; got {type(a).__name__}")
    if n_rows < 0 or n_cols < 0 or a.numel() != n_rows * n_cols:
        raise ValueError(f"`n_rows` x `n_cols` ({n_rows} x {n_cols}) must be the number of elements of `a` "
                         f"({a.numel()})")
    if not a.is_contiguous():
        raise ValueError("`a` must be contiguous to be viewed as n_rows x n_cols")
    _square_matmul(a.view(n_rows, n_cols), b)
    return a
