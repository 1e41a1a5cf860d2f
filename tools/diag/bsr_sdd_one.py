"""The weight gradient of one BlockSparseLinear at 8192x4096->4096 (argv: block density dtype, or
"tf32" for float32 with TF32 allowed), run 3 times: a target for ncu on the sdd kernel
(--kernel-name regex:sdd --launch-skip 2 --launch-count 1)."""
import sys

import torch

import sparsekern

b, d = int(sys.argv[1]), float(sys.argv[2])
tf32 = sys.argv[3] == "tf32"
torch.backends.cuda.matmul.allow_tf32 = tf32
dt = torch.float32 if tf32 else getattr(torch, sys.argv[3])
dev = torch.device("cuda")
x = torch.randn(8192, 4096, device=dev, dtype=dt, requires_grad=True)
layer = sparsekern.BlockSparseLinear(4096, 4096, density=d, block_size=b, device=dev, dtype=dt)
y = layer(x)
go = torch.randn_like(y)
for _ in range(3):
    torch.autograd.grad(y, (layer.weight,), go, retain_graph=True)
torch.cuda.synchronize()
