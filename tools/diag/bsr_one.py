"""One BlockSparseLinear forward at 8192x4096->4096 (argv: block density dtype), run 3 times: a
target for ncu (--launch-skip 2 --launch-count 1 on the dds kernel)."""
import sys

import torch

import sparsekern

b, d, dt = int(sys.argv[1]), float(sys.argv[2]), getattr(torch, sys.argv[3])
dev = torch.device("cuda")
x = torch.randn(8192, 4096, device=dev, dtype=dt)
layer = sparsekern.BlockSparseLinear(4096, 4096, density=d, block_size=b, device=dev, dtype=dt)
with torch.no_grad():
    for _ in range(3):
        layer(x)
torch.cuda.synchronize()
