"""Glue between torch tensors and the native module: argument checks, streams, workspaces.

Everything here is on the host hot path of every op, so it avoids Python-level work that torch
would redo anyway (no device objects created per call, no dict lookups beyond one cache).
"""
from __future__ import annotations

import threading

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


_fwad = torch.autograd.forward_ad
_is_compiling = torch.compiler.is_compiling
_jit_tracing_state = torch._C._get_tracing_state
_functorch_stack = torch._C._functorch.peek_interpreter_stack
_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor


def jit_tracing() -> bool:
    """Whether torch.jit.trace is recording the call."""
    return _jit_tracing_state() is not None


def traced() -> bool:
    """Whether torch.compile or torch.jit.trace is recording the call. The ops then run through
    their torch.library custom ops, which both record, instead of calling the native module
    directly: a direct call is invisible to them (a jit trace replayed an empty output buffer)."""
    return _is_compiling() or _jit_tracing_state() is not None


_TENSOR, _PARAMETER = torch.Tensor, torch.nn.Parameter


def special(*ts) -> bool:
    """Whether some tensor among `ts` is a meta tensor or of a type other than Tensor / Parameter
    (FakeTensor, a __torch_dispatch__ subclass): those go through the custom ops, whose fake
    implementations (or the subclass's dispatch) handle them. Handed to the native module instead,
    fake tensors export null pointers, which its overlap checks reported as aliasing. (On every
    op's host path: identity tests of the class, ~0.1 µs per tensor.)"""
    for t in ts:
        if t is None:
            continue
        cls = type(t)
        if cls is _TENSOR or cls is _PARAMETER:
            if t.is_meta:
                return True
        elif isinstance(t, _TENSOR):
            return True
    return False


def needs_graph(*tensors) -> bool:
    """Whether an op goes through its custom op rather than straight to the library: when tracing,
    for meta / fake / subclass tensors (`special`, which the op's fake implementation or the
    subclass handles), or when autograd records a graph. (`None` entries are skipped.)"""
    return traced() or special(*tensors) or (
        torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors))


def version_of(t: torch.Tensor) -> int:
    """``t._version`` for the caches keyed on a tensor's contents (-1 for an inference tensor, which
    has no version counter: reading it raised on every call of a layer made under
    ``torch.inference_mode()``). An in-place change of an inference tensor is not seen by them."""
    return -1 if t.is_inference() else t._version


def check_no_transform(op: str, *tensors) -> None:
    """Forward-mode AD and torch.func transforms are not supported: refuse them by name. The ops'
    direct paths hand the tensors' data to the native library, which dropped a forward-mode
    tangent without a word (a dual input gave a result with no tangent) and failed on torch.func's
    wrapped tensors with "Cannot access data pointer". Costs two global reads when neither is on."""
    if _is_compiling() or (_fwad._current_level < 0 and _functorch_stack() is None):
        return  # (compiled code runs the custom ops, which torch's tracing handles)
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            continue
        if _functorch_wrapped(t) or (_fwad._current_level >= 0 and _fwad.unpack_dual(t).tangent is not None):
            _refuse(op)


_JVP = torch._C._functorch.TransformType.Jvp


def refuse_forward_ad(op: str) -> None:
    """In the custom ops' real implementations: raise while forward-mode AD is on. A compiled or
    jit-traced graph calls them with the tangents already stripped (torch.compile's backends
    dropped a dual input's tangent, a traced in-place softmax passed its input's tangent through,
    torch.func.jvp of a traced call gave zeros: session 31's audit), so unlike check_no_transform
    this cannot look at the tensors and refuses any call inside a dual level or a jvp."""
    if _fwad._current_level >= 0:
        _refuse(op)
    top = _functorch_stack()
    if top is not None and top.key() == _JVP:
        _refuse(op)


def _refuse(op: str):
    raise NotImplementedError(
        f"{op}: forward-mode AD (torch.autograd.forward_ad, torch.func.jvp / jacfwd) and torch.func "
        "transforms (vmap, grad, jacrev) are not supported by sparsekern's ops; use reverse mode "
        "(Tensor.backward / torch.autograd.grad) outside torch.func")


def as_dlpack(t):
    """DLPack capsule of a torch tensor (``torch.utils.dlpack.to_dlpack``, a C function: a fraction
    of the cost of ``Tensor.__dlpack__``'s Python wrapper). The stream is passed to the op
    explicitly, so no stream hand-shake is needed. Non-torch arrays pass through unchanged.
    """
    return _to_dlpack(t) if isinstance(t, torch.Tensor) else t


_raw_to_dlpack = torch.utils.dlpack.to_dlpack


_threads_set = threading.local()
_torch_threads = torch.get_num_threads


def follow_torch_threads() -> None:
    """Makes the library's CPU ops use torch.get_num_threads() threads, as torch's own do. The
    library has its own OpenMP runtime (torch's wheel carries another), whose team size is per
    calling thread: set in each thread that calls an op on CPU tensors, and again whenever torch's
    count changes (~0.1 µs when unchanged)."""
    n = _torch_threads()
    if getattr(_threads_set, "n", 0) != n:
        _C.set_cpu_threads(n)
        _threads_set.n = n


def _to_dlpack(t: torch.Tensor):
    """``torch.utils.dlpack.to_dlpack`` of `t` with its negative bit resolved. A lazily negated
    view (``torch._neg_view``, the ``.imag`` of a conjugated view) exports its storage without the
    sign, so the kernels computed with −t: wrong results in every family (session 31's audit).
    ``resolve_neg()`` copies only where the bit is set; the tensors the ops overwrite refuse it
    instead (inplace._check_overwritable), since a copy would take the write. ~0.1-0.2 µs per
    tensor, so the hot paths hand the tensors they made themselves (outputs, index sets) to
    ``_raw_to_dlpack``."""
    if t.is_neg():
        t = t.resolve_neg()
    if not t.is_cuda:
        follow_torch_threads()  # every op hands at least one caller tensor through here
    return _raw_to_dlpack(t)


def stream_of(t: torch.Tensor) -> int:
    """Raw pointer of torch's current stream on `t`'s device (0 for the CPU)."""
    if not t.is_cuda:
        return 0
    return _raw_stream(t.get_device())


def autocast_dtype(t: torch.Tensor):
    """The dtype torch.autocast casts the operands of matmul-like ops (F.linear, torch.matmul) to on
    `t`'s device type when autocast is on there, else None. The products and layers of this
    package follow that policy: under ``torch.autocast`` an fp32 layer takes a bf16 activation (or
    an fp32 one) as nn.Linear does, instead of raising on the mixed dtypes."""
    dev = "cuda" if t.is_cuda else "cpu" if t.is_cpu else None
    if dev is None:
        return None
    try:
        if torch.is_autocast_enabled(dev):
            return torch.get_autocast_dtype(dev)
    except TypeError:  # torch < 2.4: no device_type argument
        if dev == "cuda" and torch.is_autocast_enabled():
            return torch.get_autocast_gpu_dtype()
        if dev == "cpu" and torch.is_autocast_cpu_enabled():
            return torch.get_autocast_cpu_dtype()
    return None


def autocast_cast(dtype, t):
    """`t` as autocast casts a matmul operand to `dtype`: floating tensors other than fp64 (which
    autocast leaves alone), None and the rest unchanged."""
    if isinstance(t, torch.Tensor) and t.dtype is not dtype and t.is_floating_point() and t.dtype is not torch.float64:
        return t.to(dtype)
    return t


def autocast_args(ref: torch.Tensor, *ts) -> tuple:
    """`ts` as torch.autocast casts a matmul's operands when it is on for `ref`'s device type
    (autocast_cast each), else `ts` unchanged: one line at each entry point."""
    dt = autocast_dtype(ref)
    return ts if dt is None else tuple(autocast_cast(dt, t) for t in ts)


def _raw_stream_fallback(index: int) -> int:
    return torch.cuda.current_stream(index).cuda_stream


# torch's own C fast path (what its C++ extensions use); absent from CPU-only torch builds.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _raw_stream_fallback)


# Buffers that live as long as the process, one per (device, stream): the cuBLAS workspace and the
# bsr tile counter below (bsr.py's ones vectors likewise). Two rules keep them out of CUDA-graph
# memory pools, where no output of a graph accounts for them (torch.compile's
# mode="reduce-overhead" then refuses the graph: "tensor(s) in the cudagraph pool not tracked as
# outputs"; a plain torch.cuda.graph would keep the pool's memory as long as the cache):
#   - during a capture (the current stream capturing) nothing is cached: the call gets a buffer of
#     its own from the graph's pool, freed when the call returns (torch forbids allocating from
#     another thread then, so outside_graph_pools runs fn in the caller's thread);
#   - otherwise the buffer is allocated by a short-lived helper thread on the same stream: torch
#     routes every allocation of a *thread* to the graph pool while it warms up a CUDA-graph tree
#     (torch._inductor's cudagraph_trees), which a lazily created cache entry would otherwise
#     come from. Once per (device, stream). csr.py's plans and semi.py's compressed weights and
#     plans make their cached tensors the same way (outside_graph_pools).


def _capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (False where CUDA was never initialised,
    which is also where torch builds without CUDA would raise)."""
    return torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()


def outside_graph_pools(device: torch.device, fn):
    """fn()'s result, computed by a short-lived helper thread on the caller's current stream of
    `device` (see above: what fn allocates then comes from torch's ordinary pool even while this
    thread warms up a CUDA-graph tree). For the tensors that a cache keeps. CPU devices, and a
    capture under way (torch forbids allocating from another thread during one; the caller must
    not cache what fn makes then): fn() here."""
    if device.type != "cuda" or _capturing():
        return fn()
    import threading

    stream = torch.cuda.current_stream(device)
    out: list = []

    def run():
        try:
            with torch.cuda.device(device), torch.cuda.stream(stream):
                out.append((True, fn()))
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            out.append((False, e))

    th = threading.Thread(target=run, name="sparsekern-alloc")
    th.start()
    th.join()
    ok, value = out[0]
    if not ok:
        raise value
    return value


def persistent_buffer(nbytes: int, device: torch.device) -> torch.Tensor:
    """A uint8 buffer for a cache (outside_graph_pools), allocated in the order of the caller's
    current stream on `device`, its contents undefined. Callers of other dtypes view it."""
    return outside_graph_pools(device, lambda: torch.empty(nbytes, dtype=torch.uint8, device=device))


def _new_stream_buffer(cache: dict, t: torch.Tensor, stream: int, nbytes: int) -> tuple:
    """(pointer, bytes, tensor) of a new buffer for `t`'s device and `stream` (the current one), kept
    in `cache` unless a capture is under way (then the call's own; see above). Callers look `cache`
    up first."""
    buf = persistent_buffer(nbytes, t.device)
    ws = (buf.data_ptr(), nbytes, buf)  # the tensor keeps the memory alive
    if not _capturing():
        cache[(t.get_device(), stream)] = ws
    return ws


# One cuBLAS workspace per (device, stream): two streams must not share scratch memory, and a
# persistent buffer keeps CUDA-graph capture valid. Allocated through torch's caching allocator.
_workspaces: dict = {}


def cublas_workspace(t: torch.Tensor, stream: int) -> tuple:
    """(pointer, bytes, tensor) of the cuBLAS workspace for `t`'s device and `stream` (CUDA)."""
    ws = _workspaces.get((t.get_device(), stream))
    return ws if ws is not None else _new_stream_buffer(_workspaces, t, stream, _C.gemm_workspace_size(1, t.get_device()))


# One block-sparse dds tile-counter buffer per (device, stream) (DdsParams::workspace): the
# Hopper kernels hand out output tiles from it. Ops on one stream run in order, so they share it.
_tile_counters: dict = {}


def tile_counter(t: torch.Tensor, stream: int) -> tuple:
    """(pointer, bytes, tensor) of the bsr dds tile counter for `t`'s device and `stream` (CUDA).
    Not zeroed here: the library zeroes the counter on the stream before each launch that reads it
    (DdsParams::workspace). A fill here ran as a kernel of its own in every captured forward on a
    stream without a cached counter (a capture takes the call's own buffer; H200, session 40: a
    1.3 µs fill kernel before each dds kernel in torch.cuda.graph replays)."""
    ws = _tile_counters.get((t.get_device(), stream))
    return ws if ws is not None else _new_stream_buffer(_tile_counters, t, stream, _C.bsr_dds_workspace_bytes())


def release_workspaces() -> None:
    _workspaces.clear()
    _tile_counters.clear()


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")
