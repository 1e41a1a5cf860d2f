"""Natural-split backwards on CUDA whose head's ∂ℓ/∂F runs kron_head_f32.cu's pass, against
float64, for compute-sanitizer (memcheck). Prints "cases ok" when every case agrees."""
import math

import torch

from sparsekern import kron as K

dev = torch.device("cuda")
torch.manual_seed(0)
bad = 0
for batch, shapes in [(6, [(16, 16)] * 4), (5, [(32, 32)] * 3), (300, [(8, 8)] * 5), (7, [(64, 4), (16, 16), (16, 16)]),
                      (5, [(4, 64), (32, 32), (32, 32)])]:
    x = torch.randn(batch, math.prod(p for p, _ in shapes), device=dev)
    fs = [torch.randn(p, q, device=dev) / math.sqrt(p) for p, q in shapes]
    g = torch.randn(batch, math.prod(q for _, q in shapes), device=dev)
    x6, f6 = x.double().requires_grad_(), [f.double().requires_grad_() for f in fs]
    want = torch.autograd.grad(K.kron_reference(x6, f6), [x6, *f6], g.double())
    got = K._backward(x, fs, g, [True] * (len(fs) + 1))
    err = max(((a.double() - w).norm() / w.norm()).item() for a, w in zip(got, want))
    bad += not err < 1e-5
    print(f"{batch}x{shapes}: max rel err {err:.1e} {'ok' if err < 1e-5 else 'WRONG'}", flush=True)
torch.cuda.synchronize()
print("cases ok" if bad == 0 else f"{bad} cases WRONG")
