"""The layers and patchers used the way PyTorch users use nn.Linear models (session 30's audit of
the modules on the CPU): functional_call with another layer's state, layers made under
inference_mode, torch.jit.trace, hooks and checkpoints of patched models, tied weights. Each case
gave a silently wrong result, a crash or an unclear error before; references in float64."""
from __future__ import annotations

import io
import warnings

import pytest
import torch
from torch import nn

import sparsekern as sk
from sparsekern.kron import kron_reference
from sparsekern.testing import rel_error


def _bsl_ref(layer, x):
    return x.double() @ layer.dense_weight().double().T + layer.bias.double()


def test_block_sparse_functional_call_with_another_pattern():
    """torch.func.functional_call with another BlockSparseLinear's state_dict (same number of blocks,
    other pattern): the index sets derived from the stored pattern were the module's own, so the
    input gradient came out wrong (forward right); with a weight that requires grad, an error."""
    torch.manual_seed(0)
    a = sk.BlockSparseLinear(64, 64, density=0.5, block_size=16)
    for seed in range(1, 6):  # other random patterns with as many blocks
        b = sk.BlockSparseLinear(64, 64, density=0.5, block_size=16, generator=torch.Generator().manual_seed(seed))
        if torch.equal(a.block_col_indices, b.block_col_indices):
            continue
        x = torch.randn(5, 64, requires_grad=True)
        state = {k: v.detach().requires_grad_(v.is_floating_point()) for k, v in b.state_dict().items()}
        y = torch.func.functional_call(a, state, (x,))
        gx, gw = torch.autograd.grad(y.square().sum(), [x, state["weight"]])
        xd = x.detach().double().requires_grad_()
        wd = b.weight.detach().double().requires_grad_()
        ref_layer = sk.BlockSparseLinear(64, 64, density=0.5, block_size=16, dtype=torch.float64,
                                         generator=torch.Generator().manual_seed(seed))
        ref = torch.func.functional_call(ref_layer, {"weight": wd, "bias": b.bias.detach().double()}, (xd,))
        rx, rw = torch.autograd.grad(ref.square().sum(), [xd, wd])
        assert rel_error(y, ref) <= 1e-5
        assert rel_error(gx, rx) <= 1e-5 and rel_error(gw, rw) <= 1e-5
    # the module's own pattern is used again afterwards
    x = torch.randn(3, 64)
    assert rel_error(a(x), _bsl_ref(a, x)) <= 1e-5


def _ops_in_graph(gm) -> list:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def _check_call_against_float64(src, x, w, y, gx, gw):
    """y = the layer's call on x with src's pattern and weight w (gx, gw: the gradients of Σ y²)
    against float64: a float64 copy of src with w's values."""
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    ref_layer = sk.BlockSparseLinear(src.in_features, src.out_features, density=src.density,
                                     block_size=src.block_size, dtype=torch.float64, device=x.device)
    ref_layer.load_state_dict({k: v.detach().double() if v.is_floating_point() else v
                               for k, v in src.state_dict().items()})
    ref = torch.func.functional_call(ref_layer, {"weight": wd}, (xd,))
    rx, rw = torch.autograd.grad(ref.square().sum(), [xd, wd])
    assert rel_error(y, ref) <= 1e-5
    assert rel_error(gx, rx) <= 1e-5 and rel_error(gw, rw) <= 1e-5


@pytest.mark.parametrize("fullgraph", [False, True])
def test_block_sparse_compiled_functional_call_with_another_pattern(fullgraph, device):
    """The same under torch.compile: tracing does not see the ids and versions the eager check
    reads, so a compiled call with another pattern read the layer's own derived sets (a wrong input
    gradient on the GPU, an error on the CPU). Identity against the recorded sets is traced and
    guarded: other stored sets get their derived sets from one validated op in the graph, the
    layer's own buffers (and a plain compiled call) do not, and a bad pattern is refused by name."""
    torch.manual_seed(0)
    a = sk.BlockSparseLinear(64, 48, density=0.5, block_size=16, device=device)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(_ops_in_graph(gm))
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    torch._dynamo.reset()
    call = torch.compile(lambda params, x: torch.func.functional_call(a, params, (x,)), backend=backend,
                         fullgraph=fullgraph)
    derive = "sparsekern.bsr_index_sets_for_call.default"
    others = [sk.BlockSparseLinear(64, 48, density=0.5, block_size=16,
                                   generator=torch.Generator().manual_seed(s), device=device) for s in (3, 4)]
    assert not any(torch.equal(o.block_col_indices, a.block_col_indices) for o in others)
    for src, own in ((others[0], False), (a, True), (others[1], False), (others[0], False)):
        # own: the layer's registered tensors themselves; else detached copies of src's state
        state = ({k: v for k, v in [*a.named_parameters(), *a.named_buffers()]} if own else
                 {k: v.detach().requires_grad_(v.is_floating_point()) for k, v in src.state_dict().items()})
        x = torch.randn(7, 64, device=device, requires_grad=True)
        n_graphs = len(graphs)
        y = call(state, x)
        w = state["weight"]
        gx, gw = torch.autograd.grad(y.square().sum(), [x, w])
        _check_call_against_float64(src, x, w, y, gx, gw)
        if len(graphs) > n_graphs:  # this call compiled: derived sets in the graph only for others
            assert (derive in graphs[-1]) == (not own), graphs[-1]
    # a plain compiled call of the layer derives nothing
    torch._dynamo.reset()
    graphs.clear()
    x = torch.randn(3, 64, device=device)
    assert rel_error(torch.compile(a, backend=backend, fullgraph=fullgraph)(x), _bsl_ref(a, x)) <= 1e-5
    assert graphs and all(derive not in g for g in graphs)
    # another pattern that is not a valid one: refused by name, not run
    bad = {k: v.detach().clone() for k, v in others[0].state_dict().items()}
    bad["block_col_indices"][0] = 7  # block column out of range (3 block columns)
    with pytest.raises(ValueError, match="block_col_indices"):
        call(bad, torch.randn(2, 64, device=device))


@pytest.mark.cuda
def test_block_sparse_functional_call_with_another_pattern_reduce_overhead():
    """The same under mode="reduce-overhead": the derivation op is captured in CUDA graphs (no host
    copy: validation is skipped while a stream captures), and every replay uses the pattern passed
    to it; forward and gradients against float64, patterns alternating, fresh inputs per call."""
    dev = torch.device("cuda")
    torch.manual_seed(5)
    a = sk.BlockSparseLinear(256, 128, density=0.25, block_size=32, device=dev)
    others = [sk.BlockSparseLinear(256, 128, density=0.25, block_size=32, device=dev,
                                   generator=torch.Generator().manual_seed(s)) for s in (11, 12)]
    torch._dynamo.reset()
    call = torch.compile(lambda params, x: torch.func.functional_call(a, params, (x,)), mode="reduce-overhead")
    for src in [others[0], others[1]] * 3:
        state = {k: v.detach().clone().requires_grad_(v.is_floating_point()) for k, v in src.state_dict().items()}
        x = torch.randn(33, 256, device=dev, requires_grad=True)
        y = call(state, x)
        gx, gw = torch.autograd.grad(y.square().sum(), [x, state["weight"]])
        _check_call_against_float64(src, x, state["weight"], y.clone(), gx, gw)


def test_block_sparse_assigned_pattern_is_used():
    """An index buffer assigned by hand (not through load_state_dict) is used with sets derived from it."""
    torch.manual_seed(1)
    layer = sk.BlockSparseLinear(32, 32, density=0.5, block_size=16)
    other = sk.BlockSparseLinear(32, 32, density=0.5, block_size=16, generator=torch.Generator().manual_seed(7))
    layer.block_row_offsets = other.block_row_offsets.clone()
    layer.block_col_indices = other.block_col_indices.clone()
    x = torch.randn(4, 32, requires_grad=True)
    layer(x).sum().backward()
    with torch.no_grad():
        ref_w = sk.BlockSparseLinear(32, 32, density=0.5, block_size=16, generator=torch.Generator().manual_seed(7))
        ref_w.weight.copy_(layer.weight)
        ref_w.bias.copy_(layer.bias)
    xd = x.detach().double().requires_grad_()
    _bsl_ref(ref_w, xd).sum().backward()
    assert rel_error(x.grad, xd.grad) <= 1e-5


def _moved_pattern(layer):
    """block_col_indices of `layer` with one block moved to a free column of its row (same offsets)."""
    ro, ci = layer.block_row_offsets, layer.block_col_indices.clone()
    nc = layer.in_features // layer.block_size
    for r in range(ro.numel() - 1):
        s, e = int(ro[r]), int(ro[r + 1])
        free = sorted(set(range(nc)) - set(ci[s:e].tolist()))
        if e > s and free:
            row = ci[s:e].tolist()
            row[-1] = free[-1]
            ci[s:e] = torch.tensor(sorted(row), dtype=ci.dtype)
            return ci
    raise AssertionError("no block to move")


def _check_layer_against_dense(layer):
    x = torch.randn(6, layer.in_features, requires_grad=True)
    y = layer(x)
    y.square().sum().backward()
    xd = x.detach().double().requires_grad_()
    ref = _bsl_ref(layer, xd)
    ref.square().sum().backward()
    assert rel_error(y, ref) <= 1e-5
    assert rel_error(x.grad, xd.grad) <= 1e-5


def test_block_sparse_pattern_changed_in_place():
    """block_col_indices.copy_(other pattern): its id did not change, so the derived sets of the old
    pattern were used (on the CPU an error about `blocks_by_col`, on CUDA unchecked)."""
    torch.manual_seed(2)
    layer = sk.BlockSparseLinear(64, 64, density=0.5, block_size=16)
    _check_layer_against_dense(layer)
    with torch.no_grad():
        layer.block_col_indices.copy_(_moved_pattern(layer))
    _check_layer_against_dense(layer)
    _check_layer_against_dense(layer)  # derived once into the layer's sets, used again


def test_block_sparse_new_pattern_with_a_reused_id():
    """A new block_col_indices tensor that took the id of the freed one it replaced (CPython reuses
    addresses) passed for the old tensor."""
    torch.manual_seed(3)
    layer = sk.BlockSparseLinear(64, 64, density=0.5, block_size=16)
    _check_layer_against_dense(layer)
    new = _moved_pattern(layer)
    old_id = id(layer.block_col_indices)
    layer.block_col_indices = torch.zeros(1, dtype=torch.int32)  # frees the original
    for _ in range(20):  # a clone usually lands at the freed address; keep the one that does
        t = new.clone()
        if id(t) == old_id:
            break
    layer.block_col_indices = t
    _check_layer_against_dense(layer)


def test_layers_made_under_inference_mode():
    """Inference tensors have no version counter: a SparseLinear made (or loaded) under
    torch.inference_mode() raised on every call, inside or outside it."""
    torch.manual_seed(2)
    x = torch.randn(3, 64)
    with torch.inference_mode():
        lin = nn.Linear(64, 32)
        sp = sk.SparseLinear.from_dense(lin, density=0.5)
        y_in = sp(x)
        a = sk.CSRMatrix.from_dense(torch.eye(4) * 3)
        z = sk.csr_matmul(a, torch.ones(4, 2))
    ref = x.double() @ sp.weight.to_dense().double().T + lin.bias.double()
    assert rel_error(y_in, ref) <= 1e-5
    with torch.no_grad():
        assert rel_error(sp(x), ref) <= 1e-5
    assert torch.equal(z, torch.full((4, 2), 3.0))
    buf = io.BytesIO()
    torch.save(sk.SparseLinear(64, 32, density=0.5), buf)
    buf.seek(0)
    with torch.inference_mode():
        loaded = torch.load(buf, weights_only=False)
        assert loaded(x).shape == (3, 32)


def _traceable_cases():
    torch.manual_seed(3)
    fs = [torch.randn(4, 4), torch.randn(2, 3)]
    return {
        "BlockSparseLinear": sk.BlockSparseLinear(64, 32, density=0.5, block_size=16),
        "KronLinear": sk.KronLinear([(8, 4), (8, 8)]),
        "SparseLinear": sk.SparseLinear(64, 32, density=0.3),
        "SemiStructuredLinear": sk.SemiStructuredLinear(64, 32),
        "kron_matmul": (lambda t: sk.kron_matmul(t[:, :8], fs), lambda t: t[:, :8].double() @ torch.kron(*fs).double()),
        "matmul": (lambda t: sk.matmul(t, t.T), lambda t: t.double() @ t.double().T),
        "inplace_softmax": (lambda t: sk.inplace_softmax(t * 1), lambda t: torch.softmax(t.double(), -1)),
    }


@pytest.mark.parametrize("name", list(_traceable_cases()))
@pytest.mark.parametrize("grad", [False, True])
def test_jit_trace(name, grad):
    """torch.jit.trace recorded nothing of a direct native call: the traced layers returned the
    uninitialised output buffer. Traced calls go through the custom ops, which it records."""
    case = _traceable_cases()[name]
    fn, ref = (case, None) if isinstance(case, nn.Module) else case  # a layer: against its eager call
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.set_grad_enabled(grad):
            traced = torch.jit.trace(fn, torch.randn(5, 64, requires_grad=grad))
    x = torch.randn(5, 64, requires_grad=grad)
    with torch.set_grad_enabled(grad):
        got = traced(x)
        want = fn(x.detach().clone().requires_grad_(grad)) if ref is None else ref(x.detach())
    assert rel_error(got, want) <= 1e-5
    if grad:
        g = torch.autograd.grad(got.square().sum(), x)[0]
        x2 = x.detach().clone().requires_grad_()
        g2 = torch.autograd.grad(fn(x2).square().sum(), x2)[0]
        assert rel_error(g, g2) <= 1e-5


def test_model_patcher_refuses_tied_weights_and_warns_on_hooks():
    """A head tied to the embedding was silently untied (2x the parameters, diverging after one
    step); hooks on a replaced layer were silently dropped."""
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(64, 32)
            self.body = nn.Linear(32, 32)
            self.head = nn.Linear(32, 64, bias=False)
            self.head.weight = self.emb.weight

    model = Tied()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    mp = sk.BlockSparseModelPatcher()
    mp.add_pattern(r"head|body", {"density": 0.5, "block_size": 16})
    with pytest.raises(ValueError, match=r"'head'.*shared with 'emb.weight'.*unchanged"):
        mp.patch_model(model)
    assert type(model.body) is nn.Linear and model.head.weight is model.emb.weight
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())

    mp = sk.BlockSparseModelPatcher()
    mp.add_pattern(r"body", {"density": 0.5, "block_size": 16})
    model.body.register_forward_hook(lambda m, i, o: None)
    with pytest.warns(RuntimeWarning, match=r"'body' has hooks \(forward_hooks\)"):
        mp.patch_model(model)
    assert type(model.body) is sk.BlockSparseLinear


def test_clear_errors():
    bsl = sk.BlockSparseLinear(64, 32, density=0.5, block_size=16)
    with pytest.raises(TypeError, match=r"`x` must have the dtype of `s` \(the block-sparse matrix: a BlockSparseLinear's weight\)"):
        bsl(torch.randn(2, 64, dtype=torch.float64))
    meta = bsl.to("meta")  # like nn.Linear: a meta forward gives a meta result
    assert meta(torch.randn(2, 64, device="meta")).shape == (2, 32)
    with pytest.raises(TypeError, match="`input` must be a torch.Tensor; got list"):
        sk.SemiStructuredLinear(64, 32)([0.0] * 64)
    with pytest.raises(ValueError, match="meta device"):
        sk.KronLinear.from_dense(nn.Linear(16, 16, device="meta"), [(4, 4), (4, 4)])
    with pytest.raises(ValueError, match="`density` must be in"):
        sk.SparseLinear(64, 32, density=True)


def test_kron_layer_trace_matches_reference():
    """A traced KronLinear against the float64 Kronecker product (not only against itself)."""
    torch.manual_seed(4)
    m = sk.KronLinear([(8, 4), (8, 8)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(m, torch.randn(3, 64))
    x = torch.randn(6, 64)
    ref = kron_reference(x.double(), [f.double() for f in m.factors]) + m.bias.double()
    assert rel_error(traced(x), ref) <= 1e-5


try:  # the patch_inplace cases below build models; a module-level importorskip skipped the file
    import transformers
except ImportError:
    transformers = None
needs_transformers = pytest.mark.skipif(transformers is None, reason="needs transformers")


def _bert():
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64, attn_implementation="eager")
    torch.manual_seed(5)
    return transformers.BertModel(cfg).eval()


@needs_transformers
def test_patch_inplace_keeps_hooks_and_hooked_activations():
    """Hooks on the patched output blocks' submodules did not run (the in-place path calls no
    submodule), and a hook keeping the self-attention output saw it overwritten afterwards."""
    from sparsekern.integrations import patch_inplace

    model = _bert()
    ids = torch.randint(0, 50, (2, 7))
    layer = model.encoder.layer[0]
    acts = {}
    layer.attention.output.dense.register_forward_hook(lambda m, i, o: acts.__setitem__("dense", o))
    layer.attention.output.LayerNorm.register_forward_hook(lambda m, i, o: acts.__setitem__("ln", o))
    layer.output.LayerNorm.register_forward_hook(lambda m, i, o: acts.__setitem__("ffn_ln", o))
    layer.attention.self.register_forward_hook(lambda m, i, o: acts.__setitem__("context", o[0]))

    def run():
        acts.clear()
        with torch.inference_mode():
            return model(ids).last_hidden_state, dict(acts)

    ref, ref_acts = run()
    patch_inplace(model)
    out, got = run()
    assert rel_error(out, ref.double()) <= 1e-5
    assert sorted(got) == sorted(ref_acts) == ["context", "dense", "ffn_ln", "ln"]
    for k in ref_acts:
        assert rel_error(got[k], ref_acts[k].double()) <= 1e-5, k


@needs_transformers
def test_patch_inplace_without_hooks_still_runs_in_place(monkeypatch):
    """The hook checks leave unhooked models on the in-place paths."""
    from sparsekern.integrations import inplace as ip
    from sparsekern.integrations import patch_inplace

    calls = []
    real_linear, real_ln = ip.inplace_linear, ip.inplace_layer_norm
    monkeypatch.setattr(ip, "inplace_linear", lambda *a, **k: (calls.append("linear"), real_linear(*a, **k))[1])
    monkeypatch.setattr(ip, "inplace_layer_norm", lambda *a, **k: (calls.append("ln"), real_ln(*a, **k))[1])
    model = _bert()
    ids = torch.randint(0, 50, (2, 7))
    with torch.inference_mode():
        ref = model(ids).last_hidden_state
    patch_inplace(model, verify=False)
    with torch.inference_mode():
        out = model(ids).last_hidden_state
    assert rel_error(out, ref.double()) <= 1e-5
    assert calls.count("linear") == 1 and calls.count("ln") == 3  # attention output, two blocks + embeddings


@needs_transformers
def test_patch_inplace_checkpoint_loads():
    """torch.save of a patched model wrote a file torch.load could not read (a bound method in the
    instance dict); loaded, it computes the same."""
    from sparsekern.integrations import patch_inplace

    model = _bert()
    patch_inplace(model)
    ids = torch.randint(0, 50, (2, 7))
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    with torch.inference_mode():
        assert rel_error(loaded(ids).last_hidden_state, model(ids).last_hidden_state.double()) <= 1e-6


@needs_transformers
def test_patch_inplace_leaves_unknown_embeddings():
    """DeBERTa-v2/v3 embeddings (no position or token-type sum) pass the caller's inputs_embeds to
    their LayerNorm: patched, the caller's tensor was normalised in place."""
    from sparsekern.integrations import patch_inplace

    if not hasattr(transformers, "DebertaV2Model"):
        pytest.skip("transformers without DeBERTa-v2")
    cfg = transformers.DebertaV2Config(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=64, position_biased_input=False, type_vocab_size=0)
    torch.manual_seed(6)
    model = transformers.DebertaV2Model(cfg).eval()
    with torch.no_grad():
        model.embeddings.LayerNorm.weight.uniform_(0.5, 2.0)
        model.embeddings.LayerNorm.bias.normal_()
    emb = torch.randn(2, 7, 32)
    with torch.no_grad():
        ref = model(inputs_embeds=emb).last_hidden_state
    report = patch_inplace(model)
    assert "embeddings.LayerNorm" in report.skipped
    e = emb.clone()
    with torch.no_grad():
        out = model(inputs_embeds=e).last_hidden_state
    assert torch.equal(e, emb)
    assert rel_error(out, ref.double()) <= 1e-5
