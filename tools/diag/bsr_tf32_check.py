"""The tf32 paths that copy operands transposed into a workspace (dds with Bop = S, sdd on K-major
copies): a few small cases each, checked against float64, for compute-sanitizer runs. Prints
"cases ok" at the end.

Usage: python tools/diag/bsr_tf32_check.py
"""
import torch

import sparsekern
from sparsekern import BlockSparseLinear, bsr

torch.backends.cuda.matmul.allow_tf32 = True
dev = torch.device("cuda")
torch.manual_seed(0)
for block in (64, 128):
    # (5b → 3b, d = 0.4): dX on copied blocks, dW on the SM80 kernel; (2048 → 2048, d = 0.9): the
    # pattern repays the copies of dY and X, so dW runs the K-major wgmma kernel too.
    for k_in, n_out, density, m in ((5 * block, 3 * block, 0.4, 1), (5 * block, 3 * block, 0.4, 129),
                                    (2048, 2048, 0.9, 129)):
        layer = BlockSparseLinear(k_in, n_out, density=density, block_size=block, device=dev)
        x = torch.randn(m, k_in, device=dev, requires_grad=True)
        y = layer(x)
        go = torch.randn_like(y)
        gx, gw = torch.autograd.grad(y, (x, layer.weight), go)
        w = layer.to_dense_linear().weight.detach().double()
        err = ((gx.double() - go.double() @ w).norm() / (go.double() @ w).norm()).item()
        assert err < 1e-2, (block, m, err)
        rows, cols = layer.block_row_indices.long(), layer.block_col_indices.long()
        grid = (go.double().t() @ x.double()).reshape(n_out // block, block, k_in // block, block)
        ref_w = grid.permute(0, 2, 1, 3)[rows, cols]
        err = ((gw.double() - ref_w).norm() / ref_w.norm()).item()
        assert err < 1e-2, (block, m, err)
    # sdd in the usual layouts (a column-major, b row-major: copied) and given K-major (read as is)
    a = torch.randn(4 * block, 200, device=dev)
    b = torch.randn(200, 2 * block, device=dev)
    mask = torch.tensor([[1, 0], [1, 1], [0, 0], [0, 1]], dtype=torch.bool)
    pattern = sparsekern.BlockSparseMatrix.from_dense(torch.randn(4 * block, 2 * block, device=dev), block, mask)
    for a_in, b_in in ((a, b), (a.t().contiguous().t(), b.t().contiguous().t())):
        out = bsr.sdd(a_in, b_in, pattern).to_dense().double()
        dense_mask = mask.repeat_interleave(block, 0).repeat_interleave(block, 1).to(dev).double()
        ref = (a.double() @ b.double()) * dense_mask
        assert ((out - ref).norm() / ref.norm()).item() < 1e-2
torch.cuda.synchronize()
print("cases ok")
