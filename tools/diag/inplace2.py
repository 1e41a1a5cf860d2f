"""Timing of the in-place row ops at the issue-4 target shapes, for tools/diag/inplace2.sh.

Prints one line per (op, shape, dtype): median ms, TB/s, fraction of the device copy bandwidth
measured in the same process, rel error vs float64, and which CUDA path the dispatcher takes
(SPARSEKERN_INPLACE_WARP_ROWS=0 forces the block tile; the script is run once per setting).
"""
from __future__ import annotations

import json
import math
import os
import sys

import torch
import torch.nn.functional as F

import sparsekern
from sparsekern.bench import time_ms
from sparsekern.testing import rel_error

from diag_timing import burst_ms  # this folder

dev = torch.device("cuda")
warp = os.environ.get("SPARSEKERN_INPLACE_WARP_ROWS", "1") != "0"
bulk = os.environ.get("SPARSEKERN_INPLACE_BULK", "1") != "0" and torch.cuda.get_device_capability()[0] >= 9


def path(cols, dtype, op):
    """The kernel the dispatcher picks for contiguous, 16-byte aligned rows (mirrors the C++)."""
    fallback = "block-tile" if cols <= 16384 and dtype != torch.float64 else "stream"
    limit = 2048 if op == "softmax_backward" else 4096
    if (bulk and warp and op in ("layer_norm", "rms_norm") and dtype in (torch.float16, torch.bfloat16)
            and 1024 < cols <= 4096 and cols % 8 == 0):
        return "bulk-block-rows"
    if (op == "softmax" or dtype not in (torch.float16, torch.bfloat16) or not warp or cols <= 256 or cols % 8
            or cols > limit):
        return fallback
    return f"warp-rows(VPW={max(2, (1 << (cols - 1).bit_length()) >> 8)})"


def copy_tbps():
    n = 1 << 30
    src, dst = torch.empty(n, dtype=torch.uint8, device=dev), torch.empty(n, dtype=torch.uint8, device=dev)
    return 2 * n / time_ms(lambda: dst.copy_(src), dev) / 1e9


ceiling = copy_tbps()
print(f"copy ceiling {ceiling:.3f} TB/s  warp_rows={'on' if warp else 'off'} bulk={'on' if bulk else 'off'} "
      f"bulk_bytes={os.environ.get('SPARSEKERN_INPLACE_BULK_BYTES', 'default')} "
      f"norm_variant={os.environ.get('SPARSEKERN_INPLACE_NORM_VARIANT', 'default')}  {torch.cuda.get_device_name()}")
rows = []
gen = torch.Generator(device=dev).manual_seed(0)


def rnd(shape, dtype):
    return torch.randn(shape, generator=gen, device=dev).to(dtype)


def report(op, shape, dtype, fn, nbytes, err):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    extra = (torch.cuda.max_memory_allocated() - base) / 2**20
    ms = time_ms(fn, dev)
    burst = burst_ms(fn)
    tbps = nbytes / ms / 1e9
    row = dict(op=op, shape=str(shape), dtype=str(dtype).replace("torch.", ""), ms=ms, tbps=tbps,
               frac_of_copy=tbps / ceiling, burst_ms=burst, burst_frac_of_copy=nbytes / burst / 1e9 / ceiling, rel_err=err, extra_mib=extra, path=path(shape[-1], dtype, op),
               warp_rows=warp)
    rows.append(row)
    print(f"{op:18s} {str(shape):22s} {row['dtype']:9s} {ms:8.4f} ms {tbps:6.3f} TB/s {100 * tbps / ceiling:6.1f}% "
          f"(burst {100 * row['burst_frac_of_copy']:5.1f}%) err {err:.2e} extra {extra:.2f} MiB  {row['path']}", flush=True)


SM = [(32, 12, 512, 512), (256, 262144), (64, 1024, 1032)]
NORM = [(16384, 4096), (16384, 2048), (16384, 1024), (65536, 768), (16384, 4104)]
if os.environ.get("INPLACE2_NORM_SHAPES"):  # e.g. "16384x4096,16384x2048"
    NORM = [tuple(int(v) for v in s.split("x")) for s in os.environ["INPLACE2_NORM_SHAPES"].split(",")]
if os.environ.get("INPLACE2_CEIL") == "1":  # torch's in-place elementwise and copy at the norm shapes
    for shape in NORM:
        for dtype in (torch.float16, torch.float32):
            a, b = rnd(shape, dtype), rnd(shape, dtype)
            nb = 2 * a.numel() * a.element_size()
            for name, fn in (("mul_(1.0)", lambda: a.mul_(1.0)), ("copy_", lambda: a.copy_(b))):
                ms = time_ms(fn, dev)
                print(f"torch {name:10s} {str(shape):16s} {str(dtype)[6:]:8s} {ms:8.4f} ms {nb / ms / 1e9:6.3f} TB/s "
                      f"{100 * nb / ms / 1e9 / ceiling:5.1f}% (burst {100 * nb / burst_ms(fn) / 1e9 / ceiling:5.1f}%)", flush=True)
            del a, b
only_norm = os.environ.get("INPLACE2_OPS") == "norm"  # INPLACE2_OPS=norm: the 16-bit norms only
# INPLACE2_ERR=0: no error against float64 for the norms (err nan): the copy of each result to the
# host is most of a run's time, and tools/diag/norm_err.py checks the errors on its own.
check = os.environ.get("INPLACE2_ERR", "1") != "0"
for dtype in ((torch.float16, torch.bfloat16) if only_norm else (torch.float16, torch.bfloat16, torch.float32)):
    es = torch.empty((), dtype=dtype).element_size()
    for shape in ([] if only_norm else SM):
        x = rnd(shape, dtype) * 3
        err = rel_error(sparsekern.inplace_softmax(x.clone()), torch.softmax(x.double(), -1))
        report("softmax", shape, dtype, lambda x=x: sparsekern.inplace_softmax(x), 2 * x.numel() * es, err)
        del x
    for shape in ([] if only_norm else SM[:1] + [(16384, 2048), (16384, 4096)]):
        y = torch.softmax(rnd(shape, torch.float32), -1).to(dtype)
        g = rnd(shape, dtype)
        y64, g64 = y.double(), g.double()
        ref = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True))
        err = ((sparsekern.inplace_softmax_backward(g.clone(), y).double() - ref).norm() / (y64 * g64).norm()).item()
        del y64, g64, ref
        report("softmax_backward", shape, dtype, lambda g=g, y=y: sparsekern.inplace_softmax_backward(g, y),
               3 * g.numel() * es, err)
        del y, g
    for shape in NORM:
        n = shape[-1]
        x = rnd(shape, dtype) + 1
        w, b = rnd((n,), dtype), rnd((n,), dtype)
        err = rel_error(sparsekern.inplace_layer_norm(x.clone(), (n,), w, b),
                        F.layer_norm(x.double(), (n,), w.double(), b.double())) if check else math.nan
        report("layer_norm", shape, dtype, lambda x=x: sparsekern.inplace_layer_norm(x, (n,), w, b),
               2 * x.numel() * es, err)
        eps = torch.finfo(dtype).eps
        err = rel_error(sparsekern.inplace_rms_norm(x.clone(), (n,), w, eps),
                        F.rms_norm(x.double(), (n,), w.double(), eps)) if check else math.nan
        report("rms_norm", shape, dtype, lambda x=x: sparsekern.inplace_rms_norm(x, (n,), w, eps),
               2 * x.numel() * es, err)
        del x

out = os.environ.get("OUT", ".")
tag = os.environ.get("INPLACE2_TAG", f"warp{'on' if warp else 'off'}-bulk{'on' if bulk else 'off'}")
with open(os.path.join(out, f"inplace2-{tag}.json"), "w") as f:
    json.dump({"copy_tbps": ceiling, "rows": rows}, f, indent=1)
sys.exit(0)
