"""Session 31: every family on tensors of more than 2^31 elements (or bytes), where a 32-bit index
or byte offset in a kernel would wrap: silently wrong rows or an illegal address. Each case runs
in a subprocess of its own (a sticky CUDA error ends only that case) and compares sampled output
rows (first, middle, last) and, where there is one, a reduction over all rows with float64
references. Usage: python s31_large.py [CASE ...]; prints one line per case."""
import os
import subprocess
import sys

import torch

CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f


SMALL = os.environ.get("S31_SMALL") == "1"  # a CPU smoke test of the script itself, sizes / 1024
dev = "cpu" if SMALL else "cuda"
BF = torch.bfloat16


def big(n):
    return max(n >> 10, 256) if SMALL else n


def check(name, got, ref, tol):
    ref = ref.double()
    err = ((got.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
    print(f"  {name}: rel err {err:.2e} {'OK' if err < tol else 'WRONG'}", flush=True)


def rows_of(n):
    return torch.tensor([0, 1, n // 2, n - 2, n - 1], device=dev)


@case
def matmul_big_a():
    import sparsekern as sk
    M, K, N = big(1 << 21) + 3, 1024, 64
    a = torch.randn(M, K, device=dev, dtype=BF)
    b = torch.randn(K, N, device=dev, dtype=BF)
    y = sk.matmul(a, b)
    i = rows_of(M)
    check("y rows", y[i], a[i].double() @ b.double(), 2e-2)


@case
def bsr_dds_big_x():
    import sparsekern as sk
    M, K, N = big(1 << 20) + 32, 2048, 256
    x = torch.randn(M, K, device=dev, dtype=BF)
    s = sk.BlockSparseMatrix.random((K, N), 64, 0.5, dtype=BF, device=dev)
    y = sk.bsr.dds(x, s)
    i = rows_of(M)
    check("y rows", y[i], x[i].double() @ s.to_dense().double(), 2e-2)
    xg = x.requires_grad_()  # the backward of the big batch: dX rows, dW (an sdd over K = M)
    vals = s.values.detach().clone().requires_grad_()
    g = torch.randn(M, N, device=dev, dtype=BF)
    y = sk.bsr.dds(xg, s.with_values(vals))
    y.backward(g)
    w = s.to_dense().double()
    check("dx rows", xg.grad[i], g[i].double() @ w.t(), 2e-2)
    dw = torch.zeros(K, N, dtype=torch.float64, device=dev)
    for r0 in range(0, M, 1 << 17):
        dw += x[r0:r0 + (1 << 17)].double().t() @ g[r0:r0 + (1 << 17)].double()
    got = s.with_values(vals.grad).to_dense()
    check("dW (sum over all rows)", got, dw * (s.to_dense() != 0), 2e-2)


@case
def bsr_dsd_big_out():
    import sparsekern as sk
    M, K, N = big(1 << 20), 256, 2112
    s = sk.BlockSparseMatrix.random((M, K), 64, 0.5, dtype=BF, device=dev)
    x = torch.randn(K, N, device=dev, dtype=BF)
    y = sk.bsr.dsd(s, x)  # M × N = 2.2e9 elements
    i = rows_of(M)
    check("y rows", y[i], s.to_dense()[i].double() @ x.double(), 2e-2)


@case
def bsr_sdd_long_k():
    import sparsekern as sk
    M, K, N = 256, big(1 << 19) + 64, 4096
    a = torch.randn(M, K, device=dev, dtype=BF)
    b = torch.randn(K, N, device=dev, dtype=BF)  # 2.1e9 elements
    pat = sk.BlockSparseMatrix.random((M, N), 64, 0.25, dtype=BF, device=dev)
    out = sk.bsr.sdd(a, b, pat).to_dense()
    ref = torch.zeros(M, N, dtype=torch.float64, device=dev)
    for k0 in range(0, K, 1 << 16):
        ref += a[:, k0:k0 + (1 << 16)].double() @ b[k0:k0 + (1 << 16)].double()
    check("blocks", out, ref * (pat.to_dense() != 0), 2e-2)


def _kron(ps, dtype, M):
    import sparsekern as sk
    n = 1
    for p in ps:
        n *= p
    x = torch.randn(M, n, device=dev, dtype=dtype)
    fs = [(torch.randn(p, p, device=dev) / p ** 0.5).to(dtype).requires_grad_() for p in ps]
    y = sk.kron_matmul(x.requires_grad_(), fs)
    i = rows_of(M)
    kk = fs[0].detach().double()
    for f in fs[1:]:
        kk = torch.kron(kk, f.detach().double())
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    check("y rows", y[i], x[i].detach().double() @ kk, tol)
    g = torch.randn_like(y)
    y.backward(g)
    check("dx rows", x.grad[i], g[i].double() @ kk.t(), tol)
    # ∂ℓ/∂F of the first factor against float64 chunks of the reference product.
    fd = [f.detach().double().requires_grad_() for f in fs]
    for r0 in range(0, M, 1 << 16):
        k2 = fd[0]
        for f in fd[1:]:
            k2 = torch.kron(k2, f)
        (x[r0:r0 + (1 << 16)].detach().double() @ k2 * g[r0:r0 + (1 << 16)].double()).sum().backward()
    check("dF0 (sum over all rows)", fs[0].grad, fd[0].grad, 10 * tol)


@case
def kron_regtile_f32():
    _kron([64, 64], torch.float32, big(1 << 19) + 5)


@case
def kron_small_f32():
    _kron([16, 16, 16], torch.float32, big(1 << 19) + 5)


@case
def kron_generic_bf16():
    _kron([64, 64], BF, big(1 << 19) + 5)


def _rows_op(name, fn, ref_fn, C=1024):
    R = big(1 << 21) + 1
    x = torch.randn(R, C, device=dev, dtype=BF)
    i = rows_of(R)
    before = x[i].clone()
    fn(x)
    check(name, x[i], ref_fn(before.double()), 2e-2)


@case
def inplace_softmax_big():
    import sparsekern as sk
    _rows_op("softmax rows", lambda x: sk.inplace_softmax(x), lambda r: torch.softmax(r, -1))


@case
def inplace_layer_norm_big():
    import sparsekern as sk
    _rows_op("layer_norm rows", lambda x: sk.inplace_layer_norm(x, 1024),
             lambda r: torch.nn.functional.layer_norm(r, (1024,)))


@case
def inplace_rms_norm_big():
    import sparsekern as sk
    _rows_op("rms_norm rows", lambda x: sk.inplace_rms_norm(x, 1024),
             lambda r: r * torch.rsqrt(r.square().mean(-1, keepdim=True) + torch.finfo(torch.float32).eps))


@case
def square_matmul_big():
    import sparsekern as sk
    w = torch.randn(1024, 1024, device=dev, dtype=BF) / 32
    _rows_op("square_matmul rows", lambda x: sk.square_matmul(x, w), lambda r: r @ w.double())


@case
def csr_matmul_big_out():
    import sparsekern as sk
    M, K, N = big(1 << 21) + 5, 1024, 1100
    nnz_per_row = 8  # distinct sorted columns: one in each eighth of the row
    cols = torch.arange(nnz_per_row, device=dev) * (K // nnz_per_row) + torch.randint(0, K // nnz_per_row, (M, nnz_per_row), device=dev)
    crow = torch.arange(0, (M + 1) * nnz_per_row, nnz_per_row, device=dev)
    vals = torch.randn(M * nnz_per_row, device=dev, dtype=BF)
    A = torch.sparse_csr_tensor(crow, cols.reshape(-1), vals, (M, K))
    b = torch.randn(K, N, device=dev, dtype=BF)
    y = sk.csr_matmul(A, b)  # 2.3e9 elements
    i = rows_of(M)
    dense_rows = torch.zeros(len(i), K, dtype=torch.float64, device=dev)
    v = vals.reshape(M, nnz_per_row)
    for r, row in enumerate(i.tolist()):
        dense_rows[r].index_add_(0, cols[row], v[row].double())
    check("y rows", y[i], dense_rows @ b.double(), 2e-2)


def main():
    names = sys.argv[1:] or list(CASES)
    if len(sys.argv) == 2 and os.environ.get("S31_CHILD") == "1":
        print(names[0], flush=True)
        CASES[names[0]]()
        if not SMALL:
            torch.cuda.synchronize()
        return
    for name in names:
        r = subprocess.run([sys.executable, __file__, name], env={**os.environ, "S31_CHILD": "1"},
                           capture_output=True, text=True, timeout=600)
        out = (r.stdout + r.stderr).strip().splitlines()
        keep = [ln for ln in out if ln.startswith("  ") or "Error" in ln or "error" in ln]
        print(f"{name}: exit {r.returncode}")
        for ln in keep[:6]:
            print("   " + ln.strip()[:200])


if __name__ == "__main__":
    main()
