import torch, sparsekern as sk
from sparsekern import bsr
from torch._dynamo import compiled_autograd
torch.manual_seed(0)
dev = "cuda"
s = bsr.BlockSparseMatrix.random((64, 96), 32, 0.5, device=dev)
w, fs = torch.randn(5, 6, device=dev), [torch.randn(1, 2, device=dev), torch.randn(5, 3, device=dev)]
fns = {"matmul": lambda a: sk.matmul(a, w), "kron_matmul": lambda a: sk.kron_matmul(a, fs),
       "bsr.dds": lambda a: bsr.dds(torch.nn.functional.pad(a, (0, 59)), s)}
for name, fn in fns.items():
    a = torch.randn(4, 5, device=dev, requires_grad=True)
    out = fn(a); g = torch.randn_like(out)
    want = torch.autograd.grad(fn(a), a, g)[0]
    torch._dynamo.reset()
    with compiled_autograd._enable(torch.compile(backend="aot_eager", fullgraph=True)):
        out.backward(g)
    err = ((a.grad.double() - want.double()).norm() / want.double().norm()).item()
    print(f"{name} cuda compiled-autograd fullgraph: grad rel err vs eager {err:.1e}", "ok" if err < 1e-5 else "WRONG")
