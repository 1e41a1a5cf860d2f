"""One small dds (both transposes) and sdd per block size / dtype on CUDA, vs float64."""
import sys, torch
from sparsekern import BlockSparseMatrix, bsr
b, dt, op = int(sys.argv[1]), getattr(torch, sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
rows, cols, m = 4 * b, 3 * b, 300
s = BlockSparseMatrix.random((rows, cols), b, 0.5, dtype=dt).to("cuda")
def d64(x): return x.to(torch.float64).to_dense()
def rel(a, r): return ((a.double() - r).norm() / r.norm().clamp_min(1e-30)).item()
if op == "dds":
    for o in (s, s.t()):
        x = torch.randn(m, o.shape[0], device="cuda", dtype=dt)
        y = bsr.dds(x, o); torch.cuda.synchronize()
        print(f"dds b={b} {dt} transposed={o.transposed} rel={rel(y, x.double() @ d64(o)):.2e}", flush=True)
else:
    a = torch.randn(rows, m, device="cuda", dtype=dt).t().contiguous().t()  # column-major a
    bb = torch.randn(m, cols, device="cuda", dtype=dt)
    v = bsr.sdd(a, bb, s); torch.cuda.synchronize()
    ref = (a.double() @ bb.double())
    got = d64(v)
    mask = d64(s) != 0
    print(f"sdd b={b} {dt} rel={rel(got[mask], ref[mask]):.2e}", flush=True)
