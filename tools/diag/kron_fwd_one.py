"""One kron forward per case, for ncu (--kernel-name regex:kron_) or a quick device time.
Usage: python kron_fwd_one.py BATCH P1,P2,... [old|new|new:...] [--time]
--time: also prints the median kernel time of 50 graph-replayed calls and, for reference, a
torch copy of x (same bytes in and out)."""
import math
import sys

import torch
from graphtime import graph_time  # this folder (python puts a script's folder on sys.path)

from sparsekern import _C, kron_matmul

batch = int(sys.argv[1])
ps = [int(v) for v in sys.argv[2].split(",")]
if len(sys.argv) > 3 and not sys.argv[3].startswith("--"):
    _C.kron_set_forward_kernel(sys.argv[3])
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
x = torch.randn(batch, math.prod(ps), device=dev)
fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for p in ps]
for _ in range(3):
    y = kron_matmul(x, fs)
torch.cuda.synchronize()


if "--time" in sys.argv:
    out = torch.empty_like(x)
    print(f"{batch}x{ps} {sys.argv[3] if len(sys.argv) > 3 else 'auto'}: kron {graph_time(lambda: kron_matmul(x, fs)):.1f} us,"
          f" copy {graph_time(lambda: out.copy_(x)):.1f} us")
