"""Host (CPU) time per BlockSparseLinear call on CUDA, piece by piece (issue 3: at low density the
module call costs more than its kernel). Tiny problem, so the GPU work of each call is a few µs and
a loop of calls without synchronisation measures the host side. Prints µs per call for:
F.linear, the module (no grad / grad), sparsekern.bsr.dds, the validated _dds_impl, the bare
_C.bsr_dds with prebuilt capsules, and the pieces (capsules, stream, empty); then a cProfile of the
module call. Usage: python bsr_host.py [block] [dtype]
"""
from __future__ import annotations

import cProfile
import pstats
import sys
import time

import torch
import torch.nn.functional as F

import sparsekern
from sparsekern import _C
from sparsekern import bsr as B
from sparsekern._core import as_dlpack, stream_of

dev = torch.device("cuda")
block = int(sys.argv[1]) if len(sys.argv) > 1 else 64
dtype = getattr(torch, sys.argv[2]) if len(sys.argv) > 2 else torch.bfloat16
m, k, n = 16, 1024, 1024


def per_call(fn, calls=3000):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


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
                     lambda: B._check_dds_args(x, layer.weight, index, rows, cols, True, layer.bias)))]
rows_out += [("nn.Linear, grad", per_call(lambda: lin(x))),
             ("BlockSparseLinear, grad", per_call(lambda: layer(x)))]
print(f"{torch.cuda.get_device_name()}  block {block} {dtype}  m={m} {k}->{n}")
for name, us in rows_out:
    print(f"  {name:45s} {us:8.1f} us/call")

with torch.no_grad():
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        layer(x)
    prof.disable()
torch.cuda.synchronize()
pstats.Stats(prof).sort_stats("tottime").print_stats(14)
