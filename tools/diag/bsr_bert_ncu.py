"""The two products of a BlockSparseLinear backward, three times each, for ncu to profile one of
each (tools/diag/s32_run3.sh): the input gradient dds (dY · W) and the weight gradient sdd (dYᵀ · X
on the pattern, split K and fused bias sums, as the layer's backward runs it).

argv: a layer spec "dtype:in:out:block:density" (default the BERT-base 3072 → 768 b = 128 d = 0.1
row of the bench)."""
import sys

import torch

from sparsekern import bsr
from graphtime import layer_from_spec

spec = sys.argv[1] if len(sys.argv) > 1 else "bf16:3072:768:128:0.1"
layer, x, go = layer_from_spec(spec, 8192)
w = layer.weight_matrix.detach()
with torch.no_grad():
    for _ in range(3):
        bsr.dds(go, w)
        bsr._sdd_impl(go.t(), x, w.values, w.index_sets(), w.shape[0], w.shape[1], True, row_sums="fused")
torch.cuda.synchronize()
print("done", spec)
