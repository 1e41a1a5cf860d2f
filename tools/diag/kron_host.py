"""Host time per kron_matmul call, piece by piece (issue 5: the small cases of the table are
host-bound: event-timed medians of single calls measure the host when it is slower than the GPU).

For a few of the table's cases: the module-level call (kron_matmul, no autograd), _forward, the
argument checks, the output allocation, the capsules, _native_args, the bare _C.kron_matmul (fresh
capsules each call), v2 (kron_reference), one torch.mm of the same x as a yardstick, and the GPU
time of the kernels (torch.profiler, summed per call). Each host row is the best of several loops
of calls without synchronisation inside the loop (host side only). --profile adds a cProfile.

Usage: python tools/diag/kron_host.py [cpu|cuda] [--profile]
"""
from __future__ import annotations

import cProfile
import pstats
import sys

import torch

from diag_timing import host_us_per_call  # this folder

import sparsekern
from sparsekern import _C
from sparsekern.kron import (_check_args, _factor_ready, _forward, _native_args, _to_dlpack, kron_matmul,
                             kron_reference)

args = [a for a in sys.argv[1:] if not a.startswith("--")]
dev = torch.device(args[0] if args else ("cuda" if torch.cuda.is_available() else "cpu"))
sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
CASES = [(16, [32, 32]), (32, [128, 128]), (1024, [32, 32]), (1024, [8, 8, 8, 8]), (128, [32, 32, 32])]
if dev.type == "cpu":
    CASES = [(4, [4, 4]), (4, [8, 8, 8])]


def per_call(fn):
    return host_us_per_call(fn, sync, calls=1000, repeats=5, warmup=50)


def gpu_us(fn, calls=50):
    """Summed device time of the kernels of one call (torch.profiler), µs."""
    if dev.type != "cuda":
        return float("nan")
    fn()
    sync()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        sync()
    total = sum(e.device_time_total for e in prof.key_averages() if e.device_time_total > 0 and e.key and not e.key.startswith("cuda"))
    return total / calls


torch.manual_seed(0)
print(f"host µs per call on {torch.cuda.get_device_name() if dev.type == 'cuda' else 'cpu'} (fp32, TF32 off)")
torch.backends.cuda.matmul.allow_tf32 = False
for batch, sizes in CASES:
    fs = [torch.randn(p, p, device=dev) for p in sizes]
    P = 1
    for p in sizes:
        P *= p
    x = torch.randn(batch, P, device=dev)
    out = torch.empty(batch, P, device=dev)
    na = _native_args(x)
    rows = [
        ("kron_matmul", lambda: kron_matmul(x, fs)),
        ("_forward", lambda: _forward(x, fs)),
        ("v2 kron_reference", lambda: kron_reference(x, fs)),
        ("torch.mm (x·I-sized)", lambda: torch.mm(x.view(-1, sizes[-1]), fs[-1])),
        ("_check_args", lambda: _check_args(x, fs)),
        ("torch.empty", lambda: torch.empty((batch, P), dtype=x.dtype, device=x.device)),
        ("capsules", lambda: (_to_dlpack(x), [_to_dlpack(_factor_ready(f)) for f in fs], _to_dlpack(out))),
        ("_native_args", lambda: _native_args(x)),
        ("_C.kron_matmul (+capsules)", lambda: _C.kron_matmul(_to_dlpack(x), [_to_dlpack(f) for f in fs],
                                                              _to_dlpack(out), *na)),
    ]
    print(f"--- {batch}x{sizes}   GPU kernels per call: ours {gpu_us(lambda: kron_matmul(x, fs)):.1f} µs, "
          f"v2 {gpu_us(lambda: kron_reference(x, fs)):.1f} µs")
    for name, fn in rows:
        print(f"  {name:28s} {per_call(fn):8.2f}")
    if "--profile" in sys.argv and (batch, sizes) == CASES[0]:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(2000):
            kron_matmul(x, fs)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(12)
