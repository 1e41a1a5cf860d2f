"""Dense family: sparsekern.matmul / matmul_transb against float64 references, CPU and CUDA."""
from __future__ import annotations

import threading
import time

import pytest
import torch

import sparsekern
from sparsekern import matmul, matmul_transb
from sparsekern.testing import rel_error, tolerance

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]

# (a shape, b shape) for a·b; matmul_transb gets b transposed. Includes 1, primes, broadcasting.
SHAPES = [
    ((1, 1), (1, 1)),
    ((7, 13), (13, 5)),
    ((37, 64), (64, 1)),
    ((1, 31), (31, 29)),
    ((3, 17, 19), (3, 19, 23)),       # batched
    ((4, 33, 8), (8, 12)),            # batch × 2-D (folded into one GEMM)
    ((9, 11), (2, 11, 6)),            # 2-D × batch
    ((2, 1, 5, 7), (1, 3, 7, 4)),     # broadcast over two batch dims
    ((2, 3, 16, 64), (2, 3, 64, 16)),  # attention-like
]


def _ref_check(out, ref, dtype, a, b, transb, tf32=False):
    """fp64 reference; for half types also accept ≤ 2× the error of torch's own same-dtype result."""
    err = rel_error(out, ref)
    tol = tolerance(dtype, tf32)
    if err <= tol:
        return
    if dtype in (torch.float16, torch.bfloat16):
        torch_out = torch.matmul(a, b.transpose(-1, -2) if transb else b)
        assert err <= 2 * rel_error(torch_out, ref) + 1e-7, (err, tol)
        return
    raise AssertionError(f"rel error {err:.3e} > tol {tol:.1e}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("sa,sb", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("transb", [False, True], ids=["ab", "abT"])
def test_forward_matches_float64(device, dtype, sa, sb, transb):
    a = torch.randn(sa, dtype=torch.float64).to(device, dtype)
    b = torch.randn(sb, dtype=torch.float64).to(device, dtype)
    if transb:
        b = b.transpose(-1, -2).contiguous()
        out = matmul_transb(a, b)
        ref = a.double() @ b.double().transpose(-1, -2)
    else:
        out = matmul(a, b)
        ref = a.double() @ b.double()
    assert out.device == a.device and out.dtype == dtype
    assert out.shape == ref.shape
    _ref_check(out, ref, dtype, a, b, transb)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_strided_and_transposed_views(device, dtype):
    base_a = torch.randn(40, 70, dtype=torch.float64).to(device, dtype)
    base_b = torch.randn(90, 70, dtype=torch.float64).to(device, dtype)
    a = base_a[3:34, 5:66]              # row-major slice (31 × 61), row stride 70
    b = base_b[2:50, :61].t()            # transposed slice (61 × 48), strides (1, 70)
    assert not a.is_contiguous() and not b.is_contiguous()
    out = matmul(a, b)
    _ref_check(out, a.double() @ b.double(), dtype, a, b, False)
    out_t = matmul(b.t(), a.t())         # both operands transposed views
    _ref_check(out_t, b.double().t() @ a.double().t(), dtype, b.t(), a.t(), False)
    # every-other-column view: no unit stride, must still be right (copied internally)
    c = base_b[:, ::2][:61]               # 61 × 35, strides (70, 2)
    out2 = matmul(a, c)
    _ref_check(out2, a.double() @ c.double(), dtype, a, c, False)
    # matmul_transb on a K that is itself a transposed view (Q·Kᵀ with K = X.mT)
    q = torch.randn(2, 5, 9, 16, dtype=torch.float64).to(device, dtype)
    kt = torch.randn(2, 5, 16, 11, dtype=torch.float64).to(device, dtype)
    out3 = matmul_transb(q, kt.mT)
    _ref_check(out3, q.double() @ kt.double(), dtype, q, kt.mT, True)


@pytest.mark.parametrize("transb", [False, True], ids=["ab", "abT"])
def test_empty_inputs(device, transb):
    def call(a, b):
        return matmul_transb(a, b.mT) if transb else matmul(a, b)
    for sa, sb in [((0, 5), (5, 3)), ((4, 5), (5, 0)), ((0, 4, 5), (0, 5, 3)), ((2, 4, 0), (2, 0, 3))]:
        a = torch.randn(sa, device=device)
        b = torch.randn(sb, device=device)
        out = call(a, b)
        ref = a @ b
        assert out.shape == ref.shape
        assert torch.equal(out, torch.zeros_like(ref))  # k = 0: an empty sum is zero


@pytest.mark.parametrize("transb", [False, True], ids=["ab", "abT"])
def test_backward_of_empty_products(device, transb):
    for sa, sb in [((0, 5), (5, 3)), ((4, 0), (0, 3)), ((2, 4, 5), (2, 5, 0))]:
        a = torch.randn(sa, device=device, requires_grad=True)
        b0 = torch.randn(sb, device=device)
        b = (b0.mT.contiguous() if transb else b0).requires_grad_()
        out = matmul_transb(a, b) if transb else matmul(a, b)
        ga, gb = torch.autograd.grad(out, (a, b), torch.ones_like(out))
        assert ga.shape == a.shape and gb.shape == b.shape
        assert torch.equal(ga, torch.zeros_like(a)) and torch.equal(gb, torch.zeros_like(b))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("transb", [False, True], ids=["ab", "abT"])
def test_backward_matches_float64(device, dtype, transb):
    for sa, sb in [((6, 7), (7, 5)), ((3, 4, 9), (3, 9, 2)), ((3, 4, 9), (9, 2)),
                   ((2, 1, 5, 3), (1, 4, 3, 6)), ((1, 13), (13, 1))]:
        a = torch.randn(sa, dtype=torch.float64).to(device, dtype).requires_grad_()
        b0 = torch.randn(sb, dtype=torch.float64).to(device, dtype)
        b = (b0.transpose(-1, -2).contiguous() if transb else b0).requires_grad_()
        out = matmul_transb(a, b) if transb else matmul(a, b)
        g = torch.randn(out.shape, dtype=torch.float64).to(device, dtype)
        ga, gb = torch.autograd.grad(out, (a, b), g)
        a64 = a.detach().double().requires_grad_()
        b64 = b.detach().double().requires_grad_()
        ref = a64 @ (b64.transpose(-1, -2) if transb else b64)
        ra, rb = torch.autograd.grad(ref, (a64, b64), g.double())
        assert ga.shape == a.shape and gb.shape == b.shape
        tol = tolerance(dtype) * 4
        assert rel_error(ga, ra) <= tol
        assert rel_error(gb, rb) <= tol


def test_gradcheck_float64(device):
    a = torch.randn(2, 4, 5, dtype=torch.float64, device=device, requires_grad=True)
    b = torch.randn(5, 3, dtype=torch.float64, device=device, requires_grad=True)
    c = torch.randn(2, 3, 5, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(matmul, (a, b))
    assert torch.autograd.gradcheck(matmul_transb, (a, c))
    assert torch.autograd.gradgradcheck(matmul, (a, b))


def test_needs_input_grad_respected(device):
    a = torch.randn(4, 5, device=device, requires_grad=True)
    b = torch.randn(5, 3, device=device)
    out = matmul(a, b)
    out.sum().backward()
    assert a.grad is not None and b.grad is None


def test_custom_op_opcheck():
    a = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(torch.ops.sparsekern.matmul.default, (a, b, False))
    torch.library.opcheck(torch.ops.sparsekern.matmul.default, (a, torch.randn(6, 5, dtype=torch.float64), True))


def test_torch_compile_fullgraph_matches_eager():
    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = torch.nn.Linear(16, 16)
            self.k = torch.nn.Linear(16, 16)

        def forward(self, x):
            s = matmul_transb(self.q(x), self.k(x)) * 0.25
            return matmul(s.softmax(-1), x)

    torch.manual_seed(0)
    model = Attn()
    x = torch.randn(3, 7, 16, requires_grad=True)
    eager = model(x)
    compiled = torch.compile(model, fullgraph=True)
    out = compiled(x)
    torch.testing.assert_close(out, eager)
    g_eager = torch.autograd.grad(eager.sum(), x)[0]
    g_comp = torch.autograd.grad(out.sum(), x)[0]
    torch.testing.assert_close(g_comp, g_eager)


@pytest.mark.cuda
def test_torch_compile_reduce_overhead():
    """matmul / matmul_transb under torch.compile(mode="reduce-overhead") on CUDA: inductor's
    CUDA-graph trees record the custom ops on a stream of their own, where the per-stream cuBLAS
    workspace must not be cached from inside the capture (the trees refuse a graph whose pool keeps
    an allocation no output accounts for); forward and gradients against eager, three calls."""
    if not (torch.cuda.is_available() and sparsekern.cuda_available()):
        pytest.skip("needs CUDA")
    dev = torch.device("cuda")

    def attn(q, k):
        return matmul(matmul_transb(q, k).softmax(-1), k)

    compiled = torch.compile(attn, mode="reduce-overhead")
    for _ in range(3):
        q = torch.randn(4, 256, 64, device=dev, requires_grad=True)
        k = torch.randn(4, 256, 64, device=dev, requires_grad=True)
        out = compiled(q, k)
        got = torch.autograd.grad(out, [q, k], torch.ones_like(out))
        out = out.clone()  # the tree's output buffers are reused by the next replay
        ref = attn(q, k)
        want = torch.autograd.grad(ref, [q, k], torch.ones_like(ref))
        assert rel_error(out, ref) <= 1e-5
        for a, w in zip(got, want):
            assert rel_error(a, w) <= 1e-5


# ------------------------------------------------------------------------------------------------
# Bad input: clear exceptions naming the argument; the process stays healthy afterwards.
# ------------------------------------------------------------------------------------------------
def _bad_inputs(device):
    f32 = dict(device=device, dtype=torch.float32)
    return [
        ("wrong rank", lambda: matmul(torch.randn(5, **f32), torch.randn(5, 3, **f32)), ValueError, "`a`.*at least 2 dims"),
        ("wrong rank b", lambda: matmul(torch.randn(4, 5, **f32), torch.randn(5, **f32)), ValueError, "`b`.*at least 2 dims"),
        ("inner dims", lambda: matmul(torch.randn(4, 5, **f32), torch.randn(6, 3, **f32)), ValueError, "`b` must have 5 rows"),
        ("inner dims transb", lambda: matmul_transb(torch.randn(4, 5, **f32), torch.randn(3, 6, **f32)), ValueError, "`b` must have 5 columns"),
        ("batch broadcast", lambda: matmul(torch.randn(2, 4, 5, **f32), torch.randn(3, 5, 3, **f32)), ValueError, "batch dims of `a`"),
        ("mixed dtypes", lambda: matmul(torch.randn(4, 5, **f32), torch.randn(5, 3, device=device, dtype=torch.float64)), TypeError, "`b`.*same dtype"),
        ("int dtype", lambda: matmul(torch.ones(4, 5, device=device, dtype=torch.int32), torch.ones(5, 3, device=device, dtype=torch.int32)), TypeError, "`a` must have dtype"),
        ("complex dtype", lambda: matmul(torch.randn(4, 5, **f32), torch.randn(5, 3, device=device, dtype=torch.complex64)), TypeError, "`b` must have dtype"),
        ("non-tensor a", lambda: matmul([[1.0]], torch.randn(1, 1, **f32)), TypeError, "`a` must be a torch.Tensor"),
        ("non-tensor b", lambda: matmul_transb(torch.randn(1, 1, **f32), 3.0), TypeError, "`b` must be a torch.Tensor"),
    ]


@pytest.mark.parametrize("case", range(10))
def test_bad_input_raises_clear_error(device, case):
    name, fn, exc, match = _bad_inputs(device)[case]
    with pytest.raises(exc, match=match):
        fn()
    # the process and later calls stay healthy
    a = torch.randn(3, 4, device=device)
    b = torch.randn(4, 2, device=device)
    torch.testing.assert_close(matmul(a, b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
def test_mixed_devices_raise():
    a = torch.randn(4, 5, device="cuda")
    b = torch.randn(5, 3)
    with pytest.raises(ValueError, match="`b` must be on the same device as `a`"):
        matmul(a, b)
    with pytest.raises(ValueError, match="`b` must be on the same device as `a`"):
        matmul_transb(b.mT.contiguous().mT.t(), a.t())


def test_native_layer_rejects_bad_arrays():
    """The C++ validation (reached through DLPack by non-torch callers) names the argument too."""
    from sparsekern import _C
    from sparsekern._core import as_dlpack as d

    a, b = torch.randn(4, 5), torch.randn(6, 3)
    with pytest.raises(ValueError, match="`b` must have 5 rows"):
        _C.gemm(d(a), d(b), d(torch.empty(4, 3)))
    with pytest.raises(TypeError, match="`b` must have the dtype"):
        _C.gemm(d(a), d(torch.randn(5, 3, dtype=torch.float64)), d(torch.empty(4, 3)))
    with pytest.raises(TypeError, match="`a` must be float16, bfloat16, float32 or float64; got int32"):
        _C.gemm(d(torch.ones(4, 5, dtype=torch.int32)), d(torch.ones(5, 3, dtype=torch.int32)), d(torch.empty(4, 3)))
    with pytest.raises(ValueError, match="`a` must be 2-D or 3-D"):
        _C.gemm(d(torch.randn(5)), d(torch.randn(5, 3)), d(torch.empty(1, 3)))
    out = torch.empty(4, 3)
    with pytest.raises(ValueError, match="`out` must not share memory with `a`"):
        _C.gemm(d(out), d(torch.randn(3, 3)), d(out))
    # A partial overlap (out one row past a, in one buffer) and a broadcast out: refused, not a
    # product that reads rows it has already overwritten.
    buf = torch.randn(9, 3)
    with pytest.raises(ValueError, match="`out` must not share memory with `a`"):
        _C.gemm(d(buf[:8]), d(torch.randn(3, 3)), d(buf[1:]))
    with pytest.raises(ValueError, match="must not be a broadcast view"):
        _C.gemm(d(torch.randn(4, 5)), d(torch.randn(5, 5)), d(torch.zeros(1, 5).expand(4, 5)))


@pytest.mark.skipif(sparsekern.built_with_cuda(), reason="only meaningful for a CPU-only build")
def test_cpu_only_build_rejects_cuda_tensors():
    # Without a GPU no CUDA tensor can be made; exercise the check on a meta tensor's device type.
    from sparsekern._core import check_backend

    class FakeCuda:
        device = torch.device("cuda", 0)

    with pytest.raises(RuntimeError, match="built without CUDA"):
        check_backend("a", FakeCuda())


@pytest.mark.skipif(not sparsekern.built_with_cuda() or torch.cuda.is_available(),
                    reason="a CUDA build on a machine without a usable GPU")
def test_cuda_build_without_gpu_reports_no_device():
    """A CUDA-enabled build imports and runs CPU ops with no driver; CUDA entry points say why not."""
    from sparsekern import _C

    assert _C.cuda_device_count() == 0
    assert not sparsekern.cuda_available()
    with pytest.raises(RuntimeError, match="no usable CUDA driver|out of range"):
        _C.init_cublas(0)
    with pytest.raises(RuntimeError, match="no usable CUDA driver|out of range"):
        _C.gemm_workspace_size(1, 0)
    sparsekern.compat.init_cublas()  # a no-op here, never a crash
    sparsekern.compat.destroy_cublas()


# ------------------------------------------------------------------------------------------------
# CUDA specifics: stream, TF32, no copies of transposed operands, threads.
# ------------------------------------------------------------------------------------------------
@pytest.mark.cuda
def test_runs_on_current_stream_and_device():
    s = torch.cuda.Stream()
    a = torch.randn(256, 512, device="cuda")
    b = torch.randn(512, 128, device="cuda")
    with torch.cuda.stream(s):
        torch.cuda._sleep(1_000_000)  # keep the side stream busy: wrong-stream use would race
        out = matmul(a, b)
    s.synchronize()
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.cuda
def test_tf32_follows_torch_flag():
    a = torch.randn(512, 4096, device="cuda")
    b = torch.randn(4096, 512, device="cuda")
    ref = a.double() @ b.double()
    prev = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        assert rel_error(matmul(a, b), ref) < 1e-5  # full fp32
        torch.backends.cuda.matmul.allow_tf32 = True
        err = rel_error(matmul(a, b), ref)
        assert 1e-5 < err < 5e-3  # TF32 tensor cores: 10-bit mantissa inputs
        torch_err = rel_error(a @ b, ref)
        assert err <= 2 * torch_err
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


@pytest.mark.cuda
def test_transposed_operand_is_not_copied():
    q = torch.randn(16, 512, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(16, 64, 512, device="cuda", dtype=torch.float16).mT  # a transposed view
    matmul_transb(q, k)  # warm-up: creates the cuBLAS workspace
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = matmul_transb(q, k)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    assert extra <= out.numel() * out.element_size() + 4096, extra  # the output, nothing else


def test_threads_share_nothing(device):
    a = torch.randn(8, 64, 96, device=device)
    b = torch.randn(96, 80, device=device)
    ref = a.double() @ b.double()
    errors, results = [], [None] * 8

    def work(i):
        try:
            for _ in range(5):
                results[i] = matmul(a, b)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        assert rel_error(r, ref) <= tolerance(torch.float32, tf32=True)


def test_compat_seed_names(device):
    from sparsekern.compat import cublasMM, cublasTransbMM, destroy_cublas, init_cublas

    destroy_cublas()  # before anything was created: fine
    init_cublas()
    init_cublas()
    a = torch.randn(3, 6, 4, dtype=torch.float64, device=device, requires_grad=True)
    b = torch.randn(4, 5, dtype=torch.float64, device=device, requires_grad=True)
    c = torch.randn(3, 7, 4, dtype=torch.float64, device=device, requires_grad=True)
    torch.testing.assert_close(cublasMM.apply(a, b), a @ b)
    torch.testing.assert_close(cublasTransbMM.apply(a, c), a @ c.mT)
    assert torch.autograd.gradcheck(cublasMM.apply, (a, b))
    assert torch.autograd.gradcheck(cublasTransbMM.apply, (a, c))
    destroy_cublas()
    destroy_cublas()
    torch.testing.assert_close(cublasMM.apply(a, b), a @ b)  # handles are recreated lazily


@pytest.mark.cuda
def test_handles_are_per_thread_and_pooled():
    """One cuBLAS handle per (device, thread), created lazily; exited threads return theirs to a pool."""
    from sparsekern import _C
    from sparsekern.compat import destroy_cublas

    destroy_cublas()
    assert _C.live_handle_count() == 0
    a = torch.randn(16, 16, device="cuda")
    matmul(a, a)
    assert _C.live_handle_count() == 1

    def run_in_threads(n):
        barrier = threading.Barrier(n)  # all alive at once: each needs its own handle

        def work():
            barrier.wait()
            matmul(a, a)
            barrier.wait()

        ts = [threading.Thread(target=work) for _ in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    run_in_threads(3)
    assert _C.live_handle_count() == 4          # main thread + 3 concurrent threads
    # join() returns when the Python thread ends; the OS thread runs its thread_local destructors
    # (which hand the handles back) just after, so give them a moment.
    time.sleep(0.5)
    run_in_threads(3)
    assert _C.live_handle_count() == 4          # the exited threads' handles were reused
    destroy_cublas()
    assert _C.live_handle_count() == 0
    torch.testing.assert_close(matmul(a, a), a @ a, rtol=1e-4, atol=1e-4)  # recreated lazily


# --------------------------------------------------------------------------------------------
# _C.transpose: the tiled transposed copy (used by the Kronecker step-wise backward on CUDA)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rows,cols,pad", [(1, 1, 0), (7, 129, 0), (64, 32, 3), (1000, 33, 5), (33, 2049, 0)])
def test_transpose(device, dtype, rows, cols, pad):
    """Every element lands at its transposed place (odd sizes, partial tiles, padded row strides
    on both sides); the padding of `out` is left as it was."""
    from sparsekern import _C
    from sparsekern._core import as_dlpack, stream_of
    base = torch.randn(rows, cols + pad, dtype=torch.float64, device=device).to(dtype)
    src = base[:, :cols]
    out_base = torch.full((cols, rows + pad), float("nan"), dtype=dtype, device=device)
    out = out_base[:, :rows]
    _C.transpose(as_dlpack(src), as_dlpack(out), stream_of(src))
    assert torch.equal(out, src.mT)
    assert out_base[:, rows:].isnan().all()


def test_transpose_bad_input(device):
    from sparsekern import _C
    from sparsekern._core import as_dlpack, stream_of
    a = torch.randn(6, 4, device=device)
    s = stream_of(a)
    with pytest.raises(ValueError, match="`out` must be 4x6"):
        _C.transpose(as_dlpack(a), as_dlpack(torch.empty(6, 4, device=device)), s)
    with pytest.raises(TypeError, match="`out` must have the dtype"):
        _C.transpose(as_dlpack(a), as_dlpack(torch.empty(4, 6, device=device, dtype=torch.float64)), s)
    with pytest.raises(ValueError, match="`in` must have a unit column stride"):
        _C.transpose(as_dlpack(a.mT), as_dlpack(torch.empty(6, 4, device=device)), s)
    with pytest.raises(ValueError, match="must not overlap"):
        buf = torch.randn(64, device=device)
        _C.transpose(as_dlpack(buf[:24].view(6, 4)), as_dlpack(buf[20:44].view(4, 6)), s)
    with pytest.raises(ValueError, match="must be 2-D"):
        _C.transpose(as_dlpack(a.view(2, 3, 4)), as_dlpack(torch.empty(4, 6, device=device)), s)
