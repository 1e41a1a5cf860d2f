"""Edges of the public API found by an audit in session 29 (each failed before its fix):
forward-mode AD and torch.func transforms, refused by name in every family instead of a result
without its tangent or "Cannot access data pointer"; kron's left product checked in the caller's
orientation, non-tensor factors named; KronLinear's sizes must be ints; the kron CLI's bad
arguments. CPU only."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import sparsekern as sk
from sparsekern import bsr
from sparsekern.cli import main as cli_main
from sparsekern.testing import rel_error

_D = torch.float64


def _cases():
    torch.manual_seed(0)
    f = [torch.randn(8, 8, dtype=_D), torch.randn(8, 8, dtype=_D)]
    m = sk.BlockSparseMatrix.random((64, 64), 16, 0.5, dtype=_D)
    w = torch.randn(64, 64, dtype=_D)
    csr = (w * (torch.rand(64, 64) < 0.3)).to_sparse_csr()
    with torch.no_grad():
        lin = sk.BlockSparseLinear(64, 64, block_size=16, dtype=_D).requires_grad_(False)
        sp = sk.SparseLinear.from_dense(torch.nn.Linear(64, 64, dtype=_D), 0.3).requires_grad_(False) \
            if hasattr(sk.SparseLinear, "from_dense") else None
    cases = {
        "kron_matmul": lambda x: sk.kron_matmul(x, f),
        "kron_matmul left": lambda x: sk.kron_matmul(f, x.t(), left=True),
        "bsr.dds": lambda x: bsr.dds(x, m),
        "bsr.dsd": lambda x: bsr.dsd(m, x.t()),
        "bsr.sdd": lambda x: bsr.sdd(x.t(), x, m).values,
        "BlockSparseLinear": lin,
        "matmul": lambda x: sk.matmul(x, w),
        "matmul_transb": lambda x: sk.matmul_transb(x, w),
        "csr_matmul": lambda x: sk.csr_matmul(csr, x.t()),
        "csr_sddmm": lambda x: sk.csr_sddmm(x.t(), x, csr).values(),
        "inplace_softmax": lambda x: sk.inplace_softmax(x.clone()),
        "square_matmul": lambda x: sk.square_matmul(x.clone(), w),
    }
    if sp is not None:
        cases["SparseLinear"] = sp
    return cases


_NAMES = list(_cases())


@pytest.mark.parametrize("name", _NAMES)
def test_forward_mode_ad_is_refused_not_dropped(name):
    """A dual input that did not require grad went to the native call, and the result came back
    with no tangent (torch's own ops give the right one)."""
    fn = _cases()[name]
    x = torch.randn(64, 64, dtype=_D)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.randn_like(x))
        with pytest.raises(NotImplementedError, match="forward-mode AD"):
            fn(dual)
        out = fn(x)  # inside a dual level, inputs without a tangent still work
        assert isinstance(out, torch.Tensor) and fwAD.unpack_dual(out).tangent is None


@pytest.mark.parametrize("transform", ["grad", "vmap", "jvp", "jacrev"])
@pytest.mark.parametrize("name", ["kron_matmul", "bsr.dds", "matmul", "csr_matmul", "inplace_softmax"])
def test_torch_func_transforms_are_refused_by_name(name, transform):
    fn = _cases()[name]
    x = torch.randn(64, 64, dtype=_D)
    if transform == "grad":
        call = lambda: torch.func.grad(lambda t: fn(t).sum())(x)  # noqa: E731
    elif transform == "vmap":
        call = lambda: torch.func.vmap(fn)(x.unsqueeze(0).expand(2, 64, 64).clone())  # noqa: E731
    elif transform == "jvp":
        call = lambda: torch.func.jvp(fn, (x,), (torch.ones_like(x),))  # noqa: E731
    else:
        call = lambda: torch.func.jacrev(lambda t: fn(t).sum(0))(x[:2])  # noqa: E731
    with pytest.raises(NotImplementedError, match=f"{name.split()[0]}: forward-mode AD .* not supported"):
        call()


def test_kron_left_messages_use_the_callers_shapes():
    a, b = torch.randn(2, 3), torch.randn(4, 5)  # (A ⊗ B) is 8 × 15
    with pytest.raises(ValueError, match=r"`x` must have dim -2 of size 15 \(= 3·5, the product of the "
                                         r"factors' columns\) for left=True; got shape \(14, 7\)"):
        sk.kron_matmul([a, b], torch.randn(14, 7), left=True)
    with pytest.raises(ValueError, match=r"`x` must have size 15 .* got shape \(14,\)"):
        sk.kron_matmul([a, b], torch.randn(14), left=True)
    with pytest.raises(ValueError, match=r"`factors\[0\]` must have non-zero dims; got shape \(0, 3\)"):
        sk.kron_matmul([torch.randn(0, 3), b], torch.randn(15, 2), left=True)
    x = torch.randn(15, 7, dtype=_D)
    got = sk.kron_matmul([a.double(), b.double()], x, left=True)
    assert torch.allclose(got, torch.kron(a.double(), b.double()) @ x)


@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("bad", [np.ones((3, 2), np.float32), [[1.0, 2.0]] * 3, 2.0, None])
def test_kron_non_tensor_factor_is_named(bad, left):
    """A list holding an array went to the custom op, whose schema refused it ("Expected a value of
    type 'List[Tensor]'") before the library's check could name the factor."""
    a = torch.randn(2, 2)
    with pytest.raises(TypeError, match=r"`factors\[1\]` must be a torch.Tensor"):
        if left:
            sk.kron_matmul([a, bad], torch.randn(4, 3), left=True)
        else:
            sk.kron_matmul(torch.randn(4, 6), [a, bad])


@pytest.mark.parametrize("shape", [(3, 2.9), (True, 2), (3, "4"), (3,), 5])
def test_kron_linear_sizes_must_be_ints(shape):
    """(3, 2.9) built a 3 × 2 factor (int() truncated it) and (True, 2) a 1 × 2 one."""
    with pytest.raises(TypeError, match=r"`factor_shapes\[0\]` must be a \(p, q\) pair of ints"):
        sk.KronLinear([shape, (4, 5)])
    assert sk.KronLinear([(np.int64(3), 2), (4, 5)]).out_features == 10


@pytest.mark.parametrize("argv", [["kron", "-3", "4", "4", "check"], ["kron", "0", "4", "check"],
                                  ["kron", "--iters", "0", "8", "4", "profile"],
                                  ["kron", "--iters", "-1", "8", "4", "profile"]])
def test_kron_cli_refuses_bad_numbers(argv, capsys):
    """A negative batch size ended in a traceback; --iters 0 / -1 "profiled" nothing."""
    with pytest.raises(SystemExit) as e:
        cli_main(argv)
    assert e.value.code == 2
    assert "must be a positive integer" in capsys.readouterr().err


def test_kron_cli_profile_reports_an_unwritable_trace(tmp_path, capsys):
    """The profiler only logged "Failed to open", and the command printed the path and exited 0."""
    bad = tmp_path / "missing" / "t.json"
    rc = cli_main(["kron", "--device", "cpu", "--iters", "1", "4", "4", "4", "profile", "--trace", str(bad)])
    assert rc == 2
    assert "cannot write the Chrome trace" in capsys.readouterr().err
    good = tmp_path / "t.json"
    rc = cli_main(["kron", "--device", "cpu", "--iters", "1", "4", "4", "4", "profile", "--trace", str(good)])
    assert rc == 0 and good.stat().st_size > 0


# --------------------------------------------------------------------------------------------
# In-place ops, dense products and SparseLinear (a second audit, same session)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fullgraph", [False, True])
def test_compiled_inplace_ops_with_autograd_give_the_right_gradients(fullgraph):
    """Compiled with autograd, inplace_softmax and square_matmul came out as the identity in the
    backward (x.grad == g), and fullgraph=True failed in their argument checks."""
    torch.manual_seed(0)
    w = torch.randn(8, 8, dtype=_D)
    for fn, ref in [(lambda t: sk.inplace_softmax(t * 1), lambda t: torch.softmax(t, -1)),
                    (lambda t: sk.square_matmul(t * 1, w), lambda t: t @ w),
                    (lambda t: sk.square_matmul(t * 1, w, True), lambda t: t @ w.t())]:
        x = torch.randn(3, 8, dtype=_D, requires_grad=True)
        g = torch.randn(3, 8, dtype=_D)
        torch._dynamo.reset()
        y = torch.compile(fn, fullgraph=fullgraph, backend="aot_eager")(x)
        (y * g).sum().backward()
        x2 = x.detach().requires_grad_()
        (ref(x2) * g).sum().backward()
        assert torch.allclose(y, ref(x.detach()))
        assert torch.allclose(x.grad, x2.grad)


@pytest.mark.parametrize("op", ["softmax", "softmax_backward", "layer_norm", "rms_norm", "square_matmul",
                                "inplace_linear"])
def test_direct_in_place_writes_bump_the_version_counter(op):
    """Outside autograd the ops wrote without bumping the version: a graph that had saved the tensor
    used the overwritten values for its gradient, silently (torch's own in-place ops raise)."""
    a = torch.randn(3, 8, requires_grad=True)
    h = torch.randn(3, 8)
    y = a * h  # saves h
    if op == "softmax":
        sk.inplace_softmax(h)
    elif op == "softmax_backward":
        sk.inplace_softmax_backward(h, torch.softmax(torch.randn(3, 8), -1))
    elif op == "layer_norm":
        sk.inplace_layer_norm(h, 8)
    elif op == "rms_norm":
        sk.inplace_rms_norm(h, 8)
    elif op == "square_matmul":
        sk.square_matmul(h, torch.randn(8, 8))
    else:
        with torch.no_grad():
            sk.inplace_linear(h, torch.nn.Linear(8, 8))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_inplace_softmax_twice_differentiable():
    """The backward was once-differentiable without saying so: gradgradcheck found zero second-order
    terms."""
    x = torch.randn(3, 6, dtype=_D, requires_grad=True)
    w = torch.randn(3, 6, dtype=_D)
    fn = lambda t: sk.inplace_softmax(t * 1) * w  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


def test_meta_tensors_give_meta_results():
    """matmul and the in-place ops on meta tensors passed the checks, then failed in DLPack
    ("Cannot pack tensors on meta")."""
    m = lambda *s: torch.empty(*s, device="meta")  # noqa: E731
    assert sk.matmul(m(3, 4), m(4, 5)).shape == (3, 5)
    assert sk.matmul_transb(m(2, 3, 4), m(5, 4)).shape == (2, 3, 5)
    for out in (sk.inplace_softmax(m(3, 4)), sk.inplace_layer_norm(m(3, 4), 4), sk.inplace_rms_norm(m(3, 4), 4),
                sk.square_matmul(m(3, 4), m(4, 4))):
        assert out.device.type == "meta" and out.shape == (3, 4)
    with pytest.raises(ValueError, match="`b` must have 4 rows"):
        sk.matmul(m(3, 4), m(5, 5))


@pytest.mark.parametrize("device", ["meta", "bogus", "mps"])
def test_cli_refuses_other_devices_by_name(device, capsys):
    with pytest.raises(SystemExit, match=r"--device must be cpu or cuda\[:N\]"):
        cli_main(["check", "--device", device, "--quick"])


def test_layer_messages_name_the_callers_arguments():
    with pytest.raises(TypeError, match=r"`input` must have the dtype of the layer's weight \(float32\)"):
        sk.SparseLinear(8, 4)(torch.randn(3, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"`x` must have 8 features in its last dim"):
        sk.inplace_linear(torch.randn(3, 4), torch.nn.Linear(8, 8))
    with pytest.raises(TypeError, match=r"`linear` must have the dtype and device of `x`"):
        sk.inplace_linear(torch.randn(3, 8, dtype=torch.float64), torch.nn.Linear(8, 8))


def test_sparse_linear_with_no_input_features_gives_the_bias():
    """nn.Linear(0, 4) returns its bias for every row; SparseLinear(0, 4) failed in a reshape."""
    layer = sk.SparseLinear(0, 4, density=0.5)
    y = layer(torch.randn(3, 0))
    assert y.shape == (3, 4) and torch.equal(y, layer.bias.expand(3, 4))
    y.sum().backward()
    assert torch.equal(layer.bias.grad, torch.full((4,), 3.0))


def test_sparse_linear_refuses_the_meta_device_by_name():
    """It failed inside torch (nonzero on meta); its pattern comes from the weights' values."""
    with pytest.raises(ValueError, match="meta device"):
        sk.SparseLinear(8, 4, device="meta")
    with torch.device("meta"), pytest.raises(ValueError, match="meta device"):
        sk.SparseLinear(8, 4)


# --------------------------------------------------------------------------------------------
# The CLI when an op raises, and its file arguments (session 30's audit of the CLI and docs)
# --------------------------------------------------------------------------------------------
def test_check_records_an_op_that_raises(monkeypatch, capsys):
    """An op that raised ended `sparsekern check` in a traceback, with no table and no summary."""
    import sparsekern.check.dense as cd

    def boom(a, b):
        raise RuntimeError("kernel exploded")

    monkeypatch.setattr(cd, "matmul", boom)
    assert cli_main(["check", "--device", "cpu", "--family", "dense", "--quick"]) == 1
    out = capsys.readouterr().out
    assert "0 passed, 1 failed" in out and "dense: RuntimeError: kernel exploded" in out


def test_bench_keeps_a_failed_row_and_writes_strict_json(monkeypatch, tmp_path, capsys):
    """A case that raised lost the table (KeyError 'metric') and left bare NaN in the JSON."""
    import json
    import sparsekern.bench.semi as bs

    real = bs.cases

    def cases(device, quick):
        cs = real(device, quick)
        for c in cs:
            c.ours = lambda: (_ for _ in ()).throw(RuntimeError("boom"))
        return cs

    monkeypatch.setattr(bs, "cases", cases)
    path = tmp_path / "b.json"
    assert cli_main(["bench", "--device", "cpu", "--family", "semi", "--json", str(path)]) == 1
    assert "WRONG" in capsys.readouterr().out
    text = path.read_text()
    assert "NaN" not in text
    rows = json.loads(text)["rows"]
    assert rows and all(r["ours"] is None and r["error"] == "RuntimeError: boom" for r in rows)


@pytest.mark.parametrize("where", ["missing/b.json", "."])
def test_bench_refuses_an_unwritable_json_before_running(where, tmp_path, capsys):
    """The whole run went by, then a traceback, when --json could not be written."""
    with pytest.raises(SystemExit) as e:
        cli_main(["bench", "--device", "cpu", "--family", "dense", "--json", str(tmp_path / where)])
    assert e.value.code == 2
    err = capsys.readouterr()
    assert "--json" in err.err and "cannot be written" in err.err and "[row]" not in err.err


@pytest.mark.parametrize("module", ["sparsekern.bench.kron", "sparsekern.bench.bsr"])
def test_bench_summaries_take_arguments(module, tmp_path):
    """`python -m sparsekern.bench.kron` without a file gave IndexError, --help a FileNotFoundError."""
    import subprocess
    import sys

    def run(*args):
        return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=120)

    r = run()
    assert r.returncode == 2 and "required: json" in r.stderr and "Traceback" not in r.stderr
    assert run("--help").returncode == 0
    r = run(str(tmp_path / "none.json"))
    assert r.returncode == 2 and "cannot read" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "x.json").write_text("[1, 2]")
    r = run(str(tmp_path / "x.json"))
    assert r.returncode == 2 and "not a bench JSON" in r.stderr
    (tmp_path / "ok.json").write_text('{"rows": []}')
    assert run(str(tmp_path / "ok.json")).returncode == 0


def test_kron_cli_out_of_memory_is_one_line(monkeypatch, capsys):
    """An input too large for memory ended in an allocator traceback."""
    import sparsekern.kron_cli as kc

    def no_memory(*a, **k):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")

    monkeypatch.setattr(kc, "_inputs", no_memory)
    assert cli_main(["kron", "--device", "cpu", "4", "8", "8", "check"]) == 2
    assert "out of memory for 4 x 64 inputs on cpu" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# torch.export / torch.compile (session 30's audit of the ops under compile and export)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["softmax", "square_matmul", "layer_norm", "rms_norm"])
def test_exported_inplace_ops_give_gradients(which):
    """Exported with example inputs that need no gradient, the mutating custom ops were recorded
    (they have no autograd formula): replayed on inputs that need one, the gradient passed
    through them as the identity. torch.export now records torch's op copied back."""
    import torch.nn.functional as F

    w = torch.randn(5, 5)
    fns = {"softmax": (lambda x: sk.inplace_softmax(x * 1.0, -1), lambda x: torch.softmax(x, -1)),
           "square_matmul": (lambda x: sk.square_matmul(x * 1.0, w), lambda x: x @ w.double()),
           "layer_norm": (lambda x: sk.inplace_layer_norm(x * 1.0, (5,)), lambda x: F.layer_norm(x, (5,))),
           "rms_norm": (lambda x: sk.inplace_rms_norm(x * 1.0, (5,), eps=1e-6), lambda x: F.rms_norm(x, (5,), eps=1e-6))}
    fn, ref = fns[which]
    if which == "rms_norm" and not hasattr(F, "rms_norm"):
        pytest.skip("torch without F.rms_norm")

    class M(torch.nn.Module):
        def forward(self, x):
            return fn(x)

    ep = torch.export.export(M(), (torch.randn(4, 5),))
    x = torch.randn(4, 5, requires_grad=True)
    g = torch.randn(4, 5)
    y = ep.module()(x)
    y.backward(g)
    xd = x.detach().double().requires_grad_()
    yd = ref(xd)
    yd.backward(g.double())
    assert rel_error(y, yd) <= 1e-5 and rel_error(x.grad, xd.grad) <= 1e-5


def test_compiled_softmax_with_autograd_keeps_masked_rows_zero():
    """Compiled with autograd, inplace_softmax ran torch.softmax: NaN for a fully masked row,
    where the function gives zeros (eager, and compiled without autograd)."""
    x = torch.randn(3, 4)
    x[1] = float("-inf")
    x = x.requires_grad_()
    torch._dynamo.reset()
    y = torch.compile(lambda t: sk.inplace_softmax(t * 1.0), backend="aot_eager", fullgraph=True)(x)
    assert torch.equal(y[1], torch.zeros(4)) and torch.isfinite(y).all()
    y.sum().backward()
    assert torch.isfinite(x.grad).all()


def test_compiled_left_kron_product_fullgraph():
    """kron_matmul(factors, x, left=True) broke the graph (a generator in math.prod)."""
    fs = [torch.randn(2, 3), torch.randn(3, 2)]
    x = torch.randn(6, 5)
    torch._dynamo.reset()
    y = torch.compile(lambda t: sk.kron_matmul(fs, t, left=True), backend="aot_eager", fullgraph=True)(x)
    assert rel_error(y, torch.kron(*fs).double() @ x.double()) <= 1e-5


@pytest.mark.parametrize("which", ["matmul", "kron_matmul", "bsr.dds"])
def test_compiled_autograd_fullgraph_over_an_eager_forward(which):
    """Compiled autograd traces the backward recorded by an eager forward: the eager Functions'
    backward called the native module through DLPack there, which dynamo cannot trace (fullgraph
    failed). They take the custom ops (or torch ops) while traced; gradients as eager."""
    from torch._dynamo import compiled_autograd

    torch.manual_seed(0)
    s = bsr.BlockSparseMatrix.random((32, 48), 16, 0.5)
    w, fs = torch.randn(5, 6), [torch.randn(1, 2), torch.randn(5, 3)]
    fns = {"matmul": lambda a: sk.matmul(a, w), "kron_matmul": lambda a: sk.kron_matmul(a, fs),
           "bsr.dds": lambda a: bsr.dds(torch.nn.functional.pad(a, (0, 27)), s)}
    a = torch.randn(4, 5, requires_grad=True)
    out = fns[which](a)
    g = torch.randn_like(out)
    want = torch.autograd.grad(fns[which](a), a, g)[0]
    torch._dynamo.reset()
    with compiled_autograd._enable(torch.compile(backend="aot_eager", fullgraph=True)):
        out.backward(g)
    assert rel_error(a.grad, want.double()) <= 1e-6
