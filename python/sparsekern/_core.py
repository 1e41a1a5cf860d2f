"""Glue between torch tensors and the native module: argument checks, streams, workspaces.

Everything here is on the host hot path of every op, so it avoids Python-level work that torch
would redo anyway (no device objects created per call, no dict lookups beyond one cache).
"""
from __future__ import annotations

import torch
import torch.utils.dlpack

from . import _C

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

_HAS_CUDA_BACKEND: bool = bool(_C.built_with_cuda())


def check_tensor(name: str, t, *, min_dim: int = 0, dtypes=FLOAT_DTYPES) -> None:
    """Raise TypeError/ValueError naming `name` unless `t` is a tensor of a supported dtype/rank."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor; got {type(t).__name__}")
    if t.dtype not in dtypes:
        allowed = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"`{name}` must have dtype {allowed}; got {str(t.dtype).replace('torch.', '')}")
    if t.dim() < min_dim:
        raise ValueError(f"`{name}` must have at least {min_dim} dims; got {t.dim()}-D shape {tuple(t.shape)}")


def check_same(name: str, t: torch.Tensor, ref_name: str, ref: torch.Tensor) -> None:
    """`t` must share dtype and device with `ref`."""
    if t.device != ref.device:
        raise ValueError(f"`{name}` must be on the same device as `{ref_name}` ({ref.device}); got {t.device}")
    if t.dtype != ref.dtype:
        raise TypeError(
            f"`{name}` must have the same dtype as `{ref_name}` ({str(ref.dtype).replace('torch.', '')}); "
            f"got {str(t.dtype).replace('torch.', '')}")


def check_backend(name: str, t: torch.Tensor) -> None:
    """A CUDA tensor in a CPU-only build is a clear error, not a crash."""
    if t.device.type == "cuda":
        if not _HAS_CUDA_BACKEND:
            raise RuntimeError(
                f"`{name}` is a CUDA tensor but this sparsekern was built without CUDA (CPU-only build); "
                "reinstall with nvcc available, or move the tensors to the CPU")
    elif t.device.type != "cpu" and t.device.type != "meta":
        raise ValueError(f"`{name}` must be on the CPU or a CUDA device; got {t.device}")


def as_dlpack(t):
    """DLPack capsule of a torch tensor (``torch.utils.dlpack.to_dlpack``, a C function: a fraction
    of the cost of ``Tensor.__dlpack__``'s Python wrapper). The stream is passed to the op
    explicitly, so no stream hand-shake is needed. Non-torch arrays pass through unchanged.
    """
    return _to_dlpack(t) if isinstance(t, torch.Tensor) else t


_to_dlpack = torch.utils.dlpack.to_dlpack


def stream_of(t: torch.Tensor) -> int:
    """Raw pointer of torch's current stream on `t`'s device (0 for the CPU)."""
    if not t.is_cuda:
        return 0
    return _raw_stream(t.get_device())


def _raw_stream_fallback(index: int) -> int:
    return torch.cuda.current_stream(index).cuda_stream


# torch's own C fast path (what its C++ extensions use); absent from CPU-only torch builds.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _raw_stream_fallback)


# One cuBLAS workspace per (device, stream): two streams must not share scratch memory, and a
# persistent buffer keeps CUDA-graph capture valid. Allocated through torch's caching allocator.
_workspaces: dict = {}


def cublas_workspace(t: torch.Tensor, stream: int) -> tuple:
    """(pointer, bytes, tensor) of the cuBLAS workspace for `t`'s device and `stream` (CUDA)."""
    key = (t.get_device(), stream)
    ws = _workspaces.get(key)
    if ws is None:
        nbytes = _C.gemm_workspace_size(1, key[0])
        buf = torch.empty(nbytes, dtype=torch.uint8, device=t.device)
        ws = _workspaces[key] = (buf.data_ptr(), nbytes, buf)  # the tensor keeps the memory alive
    return ws


# One block-sparse dds tile-counter buffer per (device, stream) (DdsParams::workspace): the
# Hopper kernels hand out output tiles from it. Ops on one stream run in order, so they share it.
_tile_counters: dict = {}


def tile_counter(t: torch.Tensor, stream: int) -> tuple:
    """(pointer, bytes, tensor) of the bsr dds tile counter for `t`'s device and `stream` (CUDA)."""
    key = (t.get_device(), stream)
    ws = _tile_counters.get(key)
    if ws is None:
        nbytes = _C.bsr_dds_workspace_bytes()
        buf = torch.zeros(nbytes, dtype=torch.uint8, device=t.device)
        ws = _tile_counters[key] = (buf.data_ptr(), nbytes, buf)
    return ws


def release_workspaces() -> None:
    _workspaces.clear()
    _tile_counters.clear()


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")
