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


def test_semi_linear_weight_update_recompresses(device):
    """After an in-place weight change (an optimizer step) the output uses the new weight."""
    dtype = _dtypes(device)[0]
    layer = sk.SemiStructuredLinear.from_dense(torch.nn.Linear(32, 16, device=device, dtype=dtype))
    x = randn(16, 32, dtype=dtype, device=device)
    layer(x)
    opt = torch.optim.SGD(layer.parameters(), lr=0.5)
    layer(x).square().sum().backward()
    opt.step()
    with torch.no_grad():
        ref = torch.nn.functional.linear(x.double(), (layer.weight * layer.mask).double(), layer.bias.double())
        assert rel_error(layer(x), ref) <= tolerance(dtype)
    assert (layer.weight[~layer.mask] == 0).all()


def test_semi_gradcheck():
    layer = sk.SemiStructuredLinear(8, 5, dtype=torch.float64)
    x = randn(3, 8, dtype=torch.float64).requires_grad_()
    w = layer.weight.detach().clone().requires_grad_()
    b = layer.bias.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda xx, ww, bb: sksemi._semi_linear_op(xx, ww, layer.mask, bb), (x, w, b))


@pytest.mark.cuda
@pytest.mark.skipif(not sksemi.cusparselt_enabled(), reason="cuSPARSELt path is opt-in (SPARSEKERN_CUSPARSELT=1)")
def test_semi_cuda_uses_cusparselt_and_caches():
    """The CUDA path compresses once, plans and searches once per shape, then only runs."""
    device = torch.device("cuda")
    layer = sk.SemiStructuredLinear(64, 32, device=device, dtype=torch.float16)
    x = randn(48, 64, dtype=torch.float16, device=device)
    with torch.no_grad():
        layer(x)
        before = sk.semi_plan_stats()
        for _ in range(4):
            y = layer(x)
        after = sk.semi_plan_stats()
    assert before["compressions"] >= 1 and before["plans_created"] >= 1
    for key in ("plans_created", "searches", "compressions", "workspace_allocations", "weight_cache_misses"):
        assert after[key] == before[key], key
    assert after["runs"] == before["runs"] + 4
    ref = torch.nn.functional.linear(x.double(), layer.weight.double(), layer.bias.double())
    assert rel_error(y, ref) <= tolerance(torch.float16)


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
