"""2:4 semi-structured sparsity: prune_2to4 and SemiStructuredLinear (cuSPARSELt on CUDA, dense
fallback on the CPU), its caches, and bad input."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import sparsekern as sk
from sparsekern import semi as sksemi
from sparsekern.testing import randn, rel_error, tolerance


def _dtypes(device):
    # cuSPARSELt's 2:4 kernels take the 16-bit types; the CPU fallback takes every float type.
    if device.type == "cuda":
        return [torch.float16, torch.bfloat16]
    return [torch.float64, torch.float32, torch.bfloat16]


def test_prune_2to4(device):
    w = randn(6, 5, 16, device=device)
    mask = sk.prune_2to4(w)
    assert mask.dtype == torch.bool and mask.shape == w.shape
    groups = mask.reshape(-1, 4)
    assert (groups.sum(1) == 2).all()
    mags = w.abs().reshape(-1, 4)
    kept = torch.where(groups, mags, torch.inf).min(1).values
    dropped = torch.where(groups, -torch.inf, mags).max(1).values
    assert (kept >= dropped).all()  # the two largest magnitudes of every group are kept
    with pytest.raises(ValueError, match="`w`"):
        sk.prune_2to4(randn(4, 6, device=device))
    with pytest.raises(TypeError, match="`w`"):
        sk.prune_2to4(torch.ones(4, 8, dtype=torch.int32, device=device))


# (in_features, out_features, input shape prefix, bias): multiples of 16, dims that need
# cuSPARSELt padding (20, 24, 1 and 5 rows), batched input.
SHAPES = [(64, 32, (16,), True), (16, 48, (1,), False), (20, 24, (5,), True), (128, 16, (2, 7), True)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}to{s[1]}-{s[2]}-{'b' if s[3] else 'nb'}")
def test_semi_linear(device, shape):
    in_f, out_f, lead, bias = shape
    for dtype in _dtypes(device):
        lin = torch.nn.Linear(in_f, out_f, bias=bias, device=device, dtype=dtype)
        layer = sk.SemiStructuredLinear.from_dense(lin)
        assert (layer.in_features, layer.out_features) == (in_f, out_f)
        assert "2:4" in repr(layer)
        assert torch.equal(layer.mask, sk.prune_2to4(lin.weight))
        assert (layer.weight[~layer.mask] == 0).all()
        x = randn(*lead, in_f, dtype=dtype, device=device).requires_grad_()
        y = layer(x)
        w64 = (lin.weight.detach() * layer.mask).double().requires_grad_()
        b64 = lin.bias.detach().double().requires_grad_() if bias else None
        x64 = x.detach().double().requires_grad_()
        ref = torch.nn.functional.linear(x64, w64, b64)
        assert y.shape == ref.shape and y.dtype == dtype
        assert rel_error(y, ref) <= tolerance(dtype), dtype
        g = randn(*y.shape, dtype=dtype, device=device)
        y.backward(g)
        wanted = (x64, w64) + ((b64,) if bias else ())
        refs = torch.autograd.grad(ref, wanted, g.double())
        tol = 2 * tolerance(dtype)
        assert rel_error(x.grad, refs[0]) <= tol
        assert rel_error(layer.weight.grad, refs[1] * layer.mask) <= tol
        assert (layer.weight.grad[~layer.mask] == 0).all()  # pruned entries get no gradient
        if bias:
            assert rel_error(layer.bias.grad, refs[2]) <= tol


def test_semi_linear_init_and_no_grad(device):
    dtype = _dtypes(device)[0]
    layer = sk.SemiStructuredLinear(32, 16, device=device, dtype=dtype)
    assert layer.mask.sum() == 32 * 16 // 2
    with torch.no_grad():
        x = randn(3, 32, dtype=dtype, device=device)
        ref = torch.nn.functional.linear(x.double(), layer.weight.double(), layer.bias.double())
        assert rel_error(layer(x), ref) <= tolerance(dtype)
        empty = layer(randn(0, 32, dtype=dtype, device=device))
        assert empty.shape == (0, 16)


@pytest.fixture
def lt_only(device, monkeypatch):
    """On CUDA, force the cuSPARSELt path (no dense candidate in the timed choice), so that the
    test exercises cuSPARSELt's plans and compressed weights even for shapes where dense wins."""
    if device.type == "cuda":
        monkeypatch.setenv("SPARSEKERN_SEMI_BACKEND", "cusparselt")
    return device


def _check_layer(layer, x, dtype):
    with torch.no_grad():
        ref = torch.nn.functional.linear(x.double(), (layer.weight * layer.mask).double(),
                                         layer.bias.double() if layer.bias is not None else None)
        assert rel_error(layer(x), ref) <= tolerance(dtype)


def test_semi_linear_weight_update_recompresses(lt_only):
    """After a weight change (an optimizer step, an in-place copy, a new tensor under .data, a new
    Parameter) the output uses the new weight: cached compressed weights never go stale."""
    device = lt_only
    dtype = _dtypes(device)[0]
    layer = sk.SemiStructuredLinear.from_dense(torch.nn.Linear(32, 16, device=device, dtype=dtype))
    x = randn(16, 32, dtype=dtype, device=device)
    _check_layer(layer, x, dtype)
    opt = torch.optim.SGD(layer.parameters(), lr=0.5)
    for _ in range(2):  # two steps: the second reuses the plans made for the first
        layer(x).square().sum().backward()
        opt.step()
        opt.zero_grad()
        _check_layer(layer, x, dtype)
    assert (layer.weight[~layer.mask] == 0).all()
    with torch.no_grad():
        layer.weight.copy_(randn(16, 32, dtype=dtype, device=device) * layer.mask)
    _check_layer(layer, x, dtype)
    layer.weight.data = randn(16, 32, dtype=dtype, device=device) * layer.mask
    _check_layer(layer, x, dtype)
    layer.weight = torch.nn.Parameter(randn(16, 32, dtype=dtype, device=device) * layer.mask)
    _check_layer(layer, x, dtype)
    with torch.no_grad():
        layer.bias.mul_(-2)  # the bias is read at run time, also when fused into cuSPARSELt's epilogue
    _check_layer(layer, x, dtype)


def test_semi_gradcheck():
    layer = sk.SemiStructuredLinear(8, 5, dtype=torch.float64)
    x = randn(3, 8, dtype=torch.float64).requires_grad_()
    w = layer.weight.detach().clone().requires_grad_()
    b = layer.bias.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda xx, ww, bb: sksemi._semi_linear_op(xx, ww, layer.mask, bb), (x, w, b))


def test_semi_backend_env(monkeypatch):
    monkeypatch.setenv("SPARSEKERN_SEMI_BACKEND", "dense")
    assert not sksemi.cusparselt_enabled()
    monkeypatch.setenv("SPARSEKERN_SEMI_BACKEND", "cusparselt")
    assert sksemi.cusparselt_enabled()
    monkeypatch.setenv("SPARSEKERN_SEMI_BACKEND", "fast")
    with pytest.raises(ValueError, match="SPARSEKERN_SEMI_BACKEND"):
        sksemi.cusparselt_enabled()
    monkeypatch.delenv("SPARSEKERN_SEMI_BACKEND")
    monkeypatch.setenv("SPARSEKERN_CUSPARSELT", "0")  # the older switch still forces the fallback
    assert not sksemi.cusparselt_enabled()
    monkeypatch.setenv("SPARSEKERN_SEMI_LAYOUT", "diagonal")
    with pytest.raises(ValueError, match="SPARSEKERN_SEMI_LAYOUT"):
        sksemi._layouts()


@pytest.mark.cuda
def test_semi_cuda_default_is_cusparselt(monkeypatch):
    """On CUDA with libcusparseLt available, the default backend is cuSPARSELt."""
    monkeypatch.delenv("SPARSEKERN_SEMI_BACKEND", raising=False)
    monkeypatch.delenv("SPARSEKERN_CUSPARSELT", raising=False)
    assert sksemi.cusparselt_enabled(), sksemi._load_error
    layer = sk.SemiStructuredLinear(256, 128, device="cuda", dtype=torch.float16)
    x = randn(512, 256, dtype=torch.float16, device="cuda")
    before = sk.semi_plan_stats()
    _check_layer(layer, x, torch.float16)
    after = sk.semi_plan_stats()
    assert after["tunings"] == before["tunings"] + 1  # a timed choice was made (dense may win it)
    report = sksemi.search_report()[-1]
    assert any(c.get("kind") == "lt" and "ms" in c for c in report["candidates"]), report


@pytest.mark.cuda
@pytest.mark.parametrize("search", ["0", "1", "lt"])
@pytest.mark.parametrize("layout", ["y", "yt"])
def test_semi_cuda_uses_cusparselt_and_caches(monkeypatch, search, layout):
    """Every search mode and output layout: correct (with and without padding and a fused bias),
    and after the first call no more planning, compression or allocation, only runs."""
    monkeypatch.setenv("SPARSEKERN_SEMI_BACKEND", "cusparselt")
    monkeypatch.setenv("SPARSEKERN_SEMI_SEARCH", search)
    monkeypatch.setenv("SPARSEKERN_SEMI_LAYOUT", layout)
    device = torch.device("cuda")
    for dtype in (torch.float16, torch.bfloat16):
        for (m, in_f, out_f, bias) in [(48, 64, 32, True), (5, 40, 24, True), (33, 128, 48, False)]:
            layer = sk.SemiStructuredLinear(in_f, out_f, bias=bias, device=device, dtype=dtype)
            x = randn(m, in_f, dtype=dtype, device=device)
            with torch.no_grad():
                layer(x)
                before = sk.semi_plan_stats()
                for _ in range(4):
                    y = layer(x)
                after = sk.semi_plan_stats()
            assert before["compressions"] >= 1 and before["plans_created"] >= 1
            for key in ("plans_created", "searches", "compressions", "workspace_allocations",
                        "weight_cache_misses", "tunings"):
                assert after[key] == before[key], key
            assert after["runs"] == before["runs"] + 4
            ref = torch.nn.functional.linear(x.double(), layer.weight.double(),
                                             layer.bias.double() if bias else None)
            assert y.shape == ref.shape and y.is_contiguous()
            assert rel_error(y, ref) <= tolerance(dtype), (dtype, m, in_f, out_f, sksemi.search_report()[-1])


@pytest.mark.cuda
def test_semi_cuda_every_configuration_is_correct(monkeypatch):
    """Each cuSPARSELt configuration of a small problem, in both layouts, gives the right result
    (the timed choice also rejects wrong ones; this test says which, if any, are)."""
    monkeypatch.setenv("SPARSEKERN_SEMI_BACKEND", "cusparselt")
    layer = sk.SemiStructuredLinear(128, 64, device="cuda", dtype=torch.bfloat16)
    x = randn(96, 128, dtype=torch.bfloat16, device="cuda")
    sksemi._clear()
    _check_layer(layer, x, torch.bfloat16)
    report = sksemi.search_report()[-1]
    # a configuration may refuse a problem (an error status at plan time); none may compute garbage
    wrong = [c for c in report["candidates"] if c.get("error") == "wrong result"]
    assert not wrong, report
    assert len([c for c in report["candidates"] if c["kind"] == "lt"]) >= 2, report


@pytest.mark.cuda
def test_semi_cuda_no_leak_warning_at_exit():
    """Cached plans are released before nanobind's leak check at interpreter exit."""
    code = (
        "import torch, sparsekern as sk\n"
        "layer = sk.SemiStructuredLinear(64, 32, device='cuda', dtype=torch.float16)\n"
        "x = torch.randn(16, 64, device='cuda', dtype=torch.float16)\n"
        "with torch.no_grad():\n"
        "    layer(x)\n"
        "print('plans', sk.semi_plan_stats()['plans_created'])\n"
    )
    import os

    env = dict(os.environ, SPARSEKERN_SEMI_BACKEND="cusparselt")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "plans" in out.stdout and "leaked" not in out.stderr, out.stderr


def test_semi_bad_input(device):
    with pytest.raises(ValueError, match="in_features"):
        sk.SemiStructuredLinear(30, 8)
    with pytest.raises(ValueError, match="in_features"):
        sk.SemiStructuredLinear.from_dense(torch.nn.Linear(6, 4))
    with pytest.raises(TypeError, match="linear"):
        sk.SemiStructuredLinear.from_dense(torch.nn.Conv1d(4, 4, 1))
    dtype = _dtypes(device)[0]
    layer = sk.SemiStructuredLinear(16, 8, device=device, dtype=dtype)
    with pytest.raises(ValueError, match="input"):
        layer(randn(2, 12, dtype=dtype, device=device))
    with pytest.raises(TypeError, match="input"):
        layer(randn(2, 16, dtype=torch.float64 if dtype != torch.float64 else torch.float32, device=device))
    if device.type == "cuda":
        # a dtype cuSPARSELt's 2:4 kernels cannot take
        layer32 = sk.SemiStructuredLinear(16, 8, device=device, dtype=torch.float32)
        with pytest.raises(TypeError, match="weight"):
            layer32(randn(2, 16, device=device))


def test_missing_cusparselt_names_the_package():
    """Without libcusparseLt (or in a build without its header) the CUDA path's loader raises an
    error naming the wheel to install. Run in a fresh process: a loaded library stays loaded."""
    code = (
        "import sparsekern.semi as s\n"
        "s._candidate_paths = lambda: ['/nonexistent/libcusparseLt.so.0']\n"
        "try:\n"
        "    s._ensure_cusparselt()\n"
        "except RuntimeError as e:\n"
        "    print('ERROR', e)\n"
    )
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "ERROR" in out.stdout, out.stdout + out.stderr
    assert "nvidia-cusparselt-cu13" in out.stdout


def test_semi_opcheck():
    layer = sk.SemiStructuredLinear(8, 4, dtype=torch.float64)
    x = randn(3, 8, dtype=torch.float64).requires_grad_()
    torch.library.opcheck(sksemi._semi_linear_op, (x, layer.weight, layer.mask, layer.bias),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))
