"""One native kron backward (every gradient) per run, for ncu (--kernel-name regex:...).
Usage: python kron_bwd_one.py BATCH P1,P2,... [SEL]   (square fp32 factors; SEL: the backward
selection, see _C.kron_set_backward_kernel)"""
import math
import sys

import torch

from sparsekern import _C
from sparsekern import kron as K

batch = int(sys.argv[1])
ps = [int(v) for v in sys.argv[2].split(",")]
if len(sys.argv) > 3:
    _C.kron_set_backward_kernel(sys.argv[3])
dev = torch.device("cuda")
x = torch.randn(batch, math.prod(ps), device=dev)
fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for p in ps]
g = torch.randn(batch, math.prod(ps), device=dev)
for _ in range(3):
    K._backward(x, fs, g, [True] * (len(ps) + 1))
torch.cuda.synchronize()
