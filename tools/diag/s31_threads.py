"""Session 31: the bindings now drop the GIL around library calls. Eight Python threads, each on a
stream of its own, call every family on the GPU concurrently (forward and backward where there is
one) for a few seconds; every result is compared with a float64 reference computed once per
thread. Prints one line per family with the worst relative error and the number of calls."""
import os
import threading
import time

import torch

import sparsekern as sk
from sparsekern.testing import rel_error

dev = "cuda"
errors: dict = {}
calls: dict = {}
failures: list = []
lock = threading.Lock()


def note(name, err):
    with lock:
        errors[name] = max(errors.get(name, 0.0), err)
        calls[name] = calls.get(name, 0) + 1


def worker(seed):
    try:
        g = torch.Generator(device="cpu").manual_seed(seed)
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            a = torch.randn(256 + seed, 192, generator=g).to(dev)
            b = torch.randn(192, 160, generator=g).to(dev)
            ref_mm = a.double() @ b.double()
            s = sk.BlockSparseMatrix.random((256, 256), 32, 0.5, generator=g).to(dev)
            xs = torch.randn(64 + seed, 256, generator=g).to(dev)
            ref_dds = xs.double() @ s.to_dense().double()
            fs = [torch.randn(16, 16, generator=g).to(dev) / 4 for _ in range(3)]
            xk = torch.randn(128 + seed, 4096, generator=g).to(dev)
            ref_k = xk.double() @ torch.kron(torch.kron(fs[0].double(), fs[1].double()), fs[2].double())
            z = torch.randn(33 + seed, 300, generator=g).to(dev)
            ref_sm = torch.softmax(z.double(), -1)
            t_end = time.time() + float(os.environ.get("S31_SECONDS", "4"))
            while time.time() < t_end:
                note("matmul", rel_error(sk.matmul(a, b), ref_mm))
                note("bsr.dds", rel_error(sk.bsr.dds(xs, s), ref_dds))
                note("kron_matmul", rel_error(sk.kron_matmul(xk, fs), ref_k))
                note("inplace_softmax", rel_error(sk.inplace_softmax(z.clone()), ref_sm))
                x = xs.clone().requires_grad_()
                sk.bsr.dds(x, s).sum().backward()
                note("bsr.dds backward", rel_error(x.grad, s.to_dense().double().sum(1).expand(x.shape[0], -1)))
            stream.synchronize()
    except Exception as e:  # noqa: BLE001
        with lock:
            failures.append(f"thread {seed}: {type(e).__name__}: {e}")


threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for name in sorted(errors):
    print(f"{name:18s} calls {calls[name]:6d}  worst rel error {errors[name]:.2e}")
print("failures:", failures if failures else "none")
