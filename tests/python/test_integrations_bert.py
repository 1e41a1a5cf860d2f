"""patch_bert_attention on a small BertModel built from a config (random weights, no downloads)."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

import sparsekern.integrations.bert as skbert  # noqa: E402
from sparsekern.integrations import patch_bert_attention  # noqa: E402


def _small_bert(device, attn="eager"):
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, vocab_size=97, max_position_embeddings=64,
                                  attn_implementation=attn)
    torch.manual_seed(0)
    return transformers.BertModel(cfg).to(device)


def test_patched_bert_matches_and_trains(device, monkeypatch):
    model = _small_bert(device).eval()
    ids = torch.randint(0, 97, (3, 19), device=device)
    mask = torch.ones(3, 19, dtype=torch.long, device=device)
    mask[1, 12:] = 0  # padding exercises the additive attention mask
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask).last_hidden_state

    assert patch_bert_attention(model) == 2
    calls = []
    real = skbert.matmul_transb
    monkeypatch.setattr(skbert, "matmul_transb", lambda q, k: (calls.append(q.shape), real(q, k))[1])
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert len(calls) == 2  # one score product per layer went through sparsekern
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)

    model.train()
    out = model(input_ids=ids, attention_mask=mask).last_hidden_state
    out.pow(2).mean().backward()
    q_grad = model.encoder.layer[0].attention.self.query.weight.grad
    k_grad = model.encoder.layer[0].attention.self.key.weight.grad
    assert q_grad is not None and torch.isfinite(q_grad).all() and q_grad.abs().sum() > 0
    assert k_grad is not None and torch.isfinite(k_grad).all() and k_grad.abs().sum() > 0


def test_gradients_match_unpatched():
    model = _small_bert("cpu").eval().double()
    ids = torch.randint(0, 97, (2, 11))
    ref_model = _small_bert("cpu").eval().double()
    ref_model.load_state_dict(model.state_dict())
    patch_bert_attention(model)
    model(input_ids=ids).last_hidden_state.sum().backward()
    ref_model(input_ids=ids).last_hidden_state.sum().backward()
    for (n, p), (_, r) in zip(model.named_parameters(), ref_model.named_parameters()):
        if r.grad is not None:
            torch.testing.assert_close(p.grad, r.grad, rtol=1e-9, atol=1e-9, msg=n)


def test_patch_refuses_non_eager_and_non_bert():
    with pytest.raises(ValueError, match="attn_implementation='eager'"):
        patch_bert_attention(_small_bert("cpu", attn="sdpa"))
    with pytest.raises(ValueError, match="no BertSelfAttention"):
        patch_bert_attention(torch.nn.Linear(3, 3))
    with pytest.raises(TypeError, match="`model` must be a torch.nn.Module"):
        patch_bert_attention("bert")


def test_patch_only_affects_that_model():
    patched, other = _small_bert("cpu"), _small_bert("cpu")
    patch_bert_attention(patched)
    assert patched.config._attn_implementation == skbert.ATTENTION_NAME
    assert other.config._attn_implementation == "eager"
