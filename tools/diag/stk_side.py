"""BlockSparseLinear forward vs stk (stanford-stk 0.7.1, MegaBlocks' Triton kernels) and dense
F.linear at 8192x4096->4096, blocks of 128, bf16/fp16, d = 0.05/0.1/0.25/0.5, in one process.
stk must be installed (pip install --no-deps stanford_stk-0.7.1-py3-none-any.whl; it needs triton,
which torch's CUDA wheels bring). Two timings per function: "call" = CUDA events around each call
(what sparsekern bench reports; host time shows when it exceeds the GPU time), "burst" = 20 calls
between two events, divided by 20 (the GPU time when the host keeps ahead). E = d * t_dense / t.
"""
from __future__ import annotations

import json
import os
import sys

import torch
import torch.nn.functional as F

import sparsekern
from sparsekern.bench import time_ms
from sparsekern.testing import rel_error

import stk  # noqa: E402
from diag_timing import burst_ms  # noqa: E402

dev = torch.device("cuda")
M, K, N = 8192, 4096, 4096


rows = []
print(f"{torch.cuda.get_device_name()} torch {torch.__version__} stk {getattr(stk, '__version__', '0.7.1')}")
for dtype in (torch.bfloat16, torch.float16):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(M, K, generator=g).to(dev, dtype)
    for d in (0.05, 0.1, 0.25, 0.5):
        layer = sparsekern.BlockSparseLinear(K, N, density=d, block_size=128, device=dev, dtype=dtype, generator=g)
        w = layer.dense_weight().detach().contiguous()
        bias = layer.bias.detach()
        w_stk = stk.ops.to_sparse(w, blocking=128)
        w_stk_t = w_stk.t()
        with torch.no_grad():
            ref = F.linear(x.double(), w.double(), bias.double())
            fns = {
                "dense": lambda: F.linear(x, w, bias),
                "ours": lambda: layer(x),
                "stk": lambda: stk.ops.dds(x, w_stk_t),
                "stk+bias": lambda: stk.ops.dds(x, w_stk_t) + bias,
            }
            err_ours = rel_error(layer(x), ref)
            err_stk = rel_error(stk.ops.dds(x, w_stk_t) + bias, ref)
            t = {name: (time_ms(fn, dev), burst_ms(fn)) for name, fn in fns.items()}
        row = {"dtype": str(dtype).split(".")[-1], "density": d, "err_ours": err_ours, "err_stk": err_stk}
        for name, (call, burst) in t.items():
            row[f"{name}_call_ms"], row[f"{name}_burst_ms"] = call, burst
        for name in ("ours", "stk", "stk+bias"):
            row[f"E_{name}_call"] = d * t["dense"][0] / t[name][0]
            row[f"E_{name}_burst"] = d * t["dense"][1] / t[name][1]
        rows.append(row)
        print(f"{row['dtype']:9s} d={d:<5} dense {t['dense'][0]:.3f}/{t['dense'][1]:.3f} ms | "
              f"E call/burst: ours {row['E_ours_call']:.2f}/{row['E_ours_burst']:.2f}  "
              f"stk {row['E_stk_call']:.2f}/{row['E_stk_burst']:.2f}  stk+bias {row['E_stk+bias_call']:.2f}/"
              f"{row['E_stk+bias_burst']:.2f} | err ours {err_ours:.1e} stk {err_stk:.1e}", flush=True)
        del layer, w, w_stk, w_stk_t
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
