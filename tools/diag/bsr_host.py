"""Host time per BlockSparseLinear call, piece by piece (issue 3: at low density the module call
costs more than its kernel). A tiny problem (m=16, density 0.25; 1024->1024 on CUDA, 256->256 on
the CPU), so the kernel is a few µs and what is measured is the Python + binding path: F.linear, the
module (no grad / grad), sparsekern.bsr.dds, the validated _dds_impl, the bare _C.bsr_dds with
prebuilt capsules, the pieces (capsules, stream, empty, checks) and autograd.Function alone. Each
row is the best of several repeats of a loop of calls (on CUDA without synchronisation inside the
loop, so it measures the host side only). --profile adds a cProfile of the module call.

Usage: python tools/diag/bsr_host.py [cpu|cuda] [block] [dtype] [--m=ROWS] [--profile]
       (device: cuda when there is one; block 64; dtype float32 on the CPU, bfloat16 on CUDA)
"""
from __future__ import annotations

import cProfile
import pstats
import sys

import torch

from diag_timing import host_us_per_call  # this folder

import sparsekern
from sparsekern import _C
from sparsekern import bsr as B
from sparsekern._core import as_dlpack, stream_of

args = [a for a in sys.argv[1:] if not a.startswith("--")]
if args and args[0] in ("cpu", "cuda"):
    dev = torch.device(args.pop(0))
else:
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
block = int(args[0]) if len(args) > 0 else 64
dtype = getattr(torch, args[1]) if len(args) > 1 else (torch.bfloat16 if dev.type == "cuda" else torch.float32)
m, k, n = 16, 256, 256
for a in sys.argv[1:]:
    if a.startswith("--m="):
        m = int(a[4:])
if dev.type == "cuda":
    k = n = 1024
sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)


def per_call(fn):
    return host_us_per_call(fn, sync, calls=2000, repeats=7, warmup=200)


torch.manual_seed(0)
layer = sparsekern.BlockSparseLinear(k, n, density=0.25, block_size=block, device=dev, dtype=dtype)
lin = torch.nn.Linear(k, n, device=dev, dtype=dtype)
x = torch.randn(m, k, device=dev, dtype=dtype)
s = layer.weight_matrix.t()
rows, cols = s._storage_shape
index = s.index_sets()
out = torch.empty(m, n, device=dev, dtype=dtype)
ro, ci, _, co, rbc, bbc = index
caps = lambda: (as_dlpack(x), as_dlpack(layer.weight), as_dlpack(ro), as_dlpack(ci), as_dlpack(co),  # noqa: E731
                as_dlpack(rbc), as_dlpack(bbc), as_dlpack(layer.bias), as_dlpack(out))


def bare():
    c = caps()
    _C.bsr_dds(c[0], c[1], rows, cols, block, c[2], c[3], c[4], c[5], c[6], True, c[7], c[8], False,
               stream_of(x))


class _Trivial(torch.autograd.Function):
    """The autograd.Function machinery alone: forward allocates the output, saves `saved` tensors."""

    @staticmethod
    def forward(ctx, a, values, index, bias, saved):
        if saved:
            ctx.save_for_backward(a, values, *index)
        return a.new_empty(a.shape[0], n)

    @staticmethod
    def backward(ctx, grad):
        return None, None, None, None, None


rows_out = []
with torch.no_grad():
    rows_out += [("F.linear (nn.Linear, no grad)", per_call(lambda: lin(x))),
                 ("BlockSparseLinear, no grad", per_call(lambda: layer(x))),
                 ("bsr.dds(x, W.t(), b), no grad", per_call(lambda: B.dds(x, s, layer.bias))),
                 ("_dds_impl (checks + capsules + call)", per_call(
                     lambda: B._dds_impl(x, layer.weight, index, rows, cols, True, layer.bias))),
                 ("_C.bsr_dds incl. 9 capsules + stream", per_call(bare)),
                 ("9 capsules only", per_call(caps)),
                 ("stream_of only", per_call(lambda: stream_of(x))),
                 ("torch.empty only", per_call(lambda: torch.empty(m, n, device=dev, dtype=dtype))),
                 ("weight_matrix.t() only", per_call(lambda: layer.weight_matrix.t())),
                 ("_check_dds_args only", per_call(
                     lambda: B._check_dds_args(x, layer.weight, index, rows, cols, True, layer.bias))),
                 ("_dds_args_ok only", per_call(
                     lambda: B._dds_args_ok(x, layer.weight, index, rows, cols, True, layer.bias)))]
rows_out += [("nn.Linear, grad", per_call(lambda: lin(x))),
             ("BlockSparseLinear, grad", per_call(lambda: layer(x))),
             ("autograd.Function, trivial fwd, 0 saved", per_call(
                 lambda: _Trivial.apply(x, layer.weight, index, layer.bias, False))),
             ("autograd.Function, trivial fwd, 8 saved", per_call(
                 lambda: _Trivial.apply(x, layer.weight, index, layer.bias, True)))]
name = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
print(f"{name}  torch {torch.__version__}  block {block} {dtype}  m={m} {k}->{n}")
for label, us in rows_out:
    print(f"  {label:45s} {us:8.1f} us/call")

if "--profile" in sys.argv:
    with torch.no_grad():
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(2000):
            layer(x)
        prof.disable()
    sync()
    pstats.Stats(prof).sort_stats("tottime").print_stats(16)
