"""Interleaved A/B of the CPU paths (dense.matmul, a kron forward, BlockSparseLinear forward and
backward): an older libsparsekern against this tree's, same Python bindings; median of 7 calls,
2 threads. The older library is found through LD_LIBRARY_PATH (searched before the bindings'
RUNPATH): OLD_LIB, default /tmp/s27/oldbuild, built with e.g.
  git worktree add /tmp/old <commit> && cmake -S /tmp/old -B /tmp/s27/oldbuild -G Ninja \
    -DSPARSEKERN_CUDA=OFF -DSPARSEKERN_BUILD_TESTS=OFF -DSPARSEKERN_BUILD_PYTHON=OFF && ninja -C /tmp/s27/oldbuild sparsekern
Run: PYTHONPATH=python python tools/diag/cpu_ab.py (session 27: benchmarks/results/cpu-bsr-gemm-session27.txt)."""
import os, subprocess, sys
code = r'''
import time, torch, sparsekern
from sparsekern import dense
from sparsekern.kron import kron_matmul
torch.manual_seed(0); torch.set_num_threads(2)
lib = [l.split()[-1] for l in open("/proc/self/maps") if "libsparsekern.so" in l][0]
def t(fn, n=7):
    fn(); ts = []
    for _ in range(n):
        s = time.perf_counter(); fn(); ts.append(time.perf_counter() - s)
    ts.sort(); return ts[n // 2] * 1e3
M = K = N = 1024
x = torch.randn(M, K)
lin = torch.nn.Linear(K, N)
with torch.no_grad():
    td = t(lambda: lin(x))
out = ["lib " + ("older" if lib.startswith(OLD) else "this tree"), f"F.linear {td:.2f}"]
a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
out.append(f"dense.matmul {t(lambda: dense.matmul(a, b)):.1f} (torch {t(lambda: a @ b):.1f})")
xk, fk = torch.randn(1024, 64 * 64), [torch.randn(64, 64), torch.randn(64, 64)]
out.append(f"kron 1024x(64,64) fwd {t(lambda: kron_matmul(xk, fk)):.2f}")
for dt in (torch.float32, torch.bfloat16):
    for blk in (32, 64):
        for d in (0.1, 0.25, 0.5):
            if dt is torch.bfloat16 and (blk, d) != (32, 0.25):
                continue
            l = sparsekern.BlockSparseLinear(K, N, density=d, block_size=blk, dtype=dt)
            xd = x.to(dt)
            with torch.no_grad():
                tf = t(lambda: l(xd))
            xg = xd.clone().requires_grad_()
            go = torch.randn(M, N, dtype=dt)
            tb = t(lambda: torch.autograd.grad(l(xg), (xg, l.weight, l.bias), go)) - tf
            out.append(f"{str(dt)[6:]} b{blk} d{d}: fwd {tf:.2f} bwd {tb:.2f}")
print(" | ".join(out))
'''
OLD = os.environ.get("OLD_LIB", "/tmp/s27/oldbuild")
code = "OLD = " + repr(OLD) + "\n" + code  # the older library's folder, for the label
for rnd in range(2):
    for which in ("old", "new"):
        env = dict(os.environ)
        if which == "old":
            env["LD_LIBRARY_PATH"] = OLD
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        print(which, r.stdout.strip() or r.stderr[-800:], flush=True)
