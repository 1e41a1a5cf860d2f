"""One register-tile backward per case (for ncu --kernel-name regex:kron_fast_bwd).
Usage: python kron_bwd_fast_ncu.py BATCH P [SEL]"""
import math
import sys

import torch

from sparsekern import _C
from sparsekern import kron as K

batch, p = int(sys.argv[1]), int(sys.argv[2])
if len(sys.argv) > 3:
    _C.kron_set_backward_kernel(sys.argv[3])
dev = torch.device("cuda")
x = torch.randn(batch, p * p, device=dev)
fs = [torch.randn(p, p, device=dev) / math.sqrt(p) for _ in range(2)]
g = torch.randn(batch, p * p, device=dev)
for _ in range(2):
    K._backward(x, fs, g, [True] * 3)
torch.cuda.synchronize()
