"""For ncu: a few eager calls of one layer's input-gradient dds (argv[1] = "dx") or weight-gradient
sdd with fused row sums ("dw"), bf16, layer "in:out:block:density" (argv[2], default BERT-base
3072:768:128:0.1), 8192 rows."""
import sys

import torch

import sparsekern
from sparsekern import bsr

dev = torch.device("cuda")
which = sys.argv[1]
k_in, n_out, b, d = (sys.argv[2] if len(sys.argv) > 2 else "3072:768:128:0.1").split(":")
k_in, n_out, b, d = int(k_in), int(n_out), int(b), float(d)
g = torch.Generator().manual_seed(0)
layer = sparsekern.BlockSparseLinear(k_in, n_out, density=d, block_size=b, device=dev, dtype=torch.bfloat16, generator=g)
w = layer.weight_matrix.detach()
x = torch.randn(8192, k_in, generator=g).to(dev, torch.bfloat16)
go = torch.randn(8192, n_out, generator=g).to(dev, torch.bfloat16)
with torch.no_grad():
    for _ in range(5):
        if which == "dx":
            bsr.dds(go, w)
        else:
            bsr._sdd_impl(go.t(), x, w.values, w.index_sets(), w.shape[0], w.shape[1], True, row_sums="fused")
torch.cuda.synchronize()
