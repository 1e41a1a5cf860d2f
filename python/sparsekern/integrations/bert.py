"""Route the attention-score product Q·Kᵀ of BERT-style models through sparsekern.matmul_transb.

transformers (≥ 4.48) selects the attention kernel of `BertSelfAttention` by
``config._attn_implementation`` through its ``AttentionInterface`` registry. The patch registers an
attention function that is transformers' eager attention with one change — the score product is
``sparsekern.matmul_transb(query, key)`` (no transposed copy of K) — and points the model's config at
it. Only the patched model is affected; other models keep their implementation.
"""
from __future__ import annotations

import torch
from torch import nn

from ..dense import matmul_transb

ATTENTION_NAME = "sparsekern_eager"


def sparsekern_eager_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor,
                               value: torch.Tensor, attention_mask, scaling=None, dropout: float = 0.0,
                               **kwargs):
    """transformers' eager attention, with Q·Kᵀ computed by sparsekern.matmul_transb."""
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    attn_weights = matmul_transb(query, key) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value)
    attn_output = attn_output.transpose(1, 2).contiguous()
    return attn_output, attn_weights


def patch_bert_attention(model: nn.Module) -> int:
    """Make every ``BertSelfAttention`` (eager attention) of `model` use ``matmul_transb`` for Q·Kᵀ.

    Returns the number of attention modules patched. Raises ValueError if the model has none or uses
    a non-eager attention implementation (load it with ``attn_implementation="eager"``), and
    RuntimeError if the installed transformers predates its attention registry.
    """
    try:
        from transformers import AttentionInterface
        from transformers.models.bert.modeling_bert import BertSelfAttention
    except ImportError as e:  # pragma: no cover - depends on the installed transformers
        raise RuntimeError("patch_bert_attention needs transformers >= 4.48 (AttentionInterface)") from e
    if not isinstance(model, nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module; got {type(model).__name__}")
    attn = [m for m in model.modules() if isinstance(m, BertSelfAttention)]
    if not attn:
        raise ValueError("`model` has no BertSelfAttention module to patch")
    configs = {id(m.config): m.config for m in attn}
    for cfg in configs.values():
        impl = getattr(cfg, "_attn_implementation", None)
        if impl not in (None, "eager", ATTENTION_NAME):
            raise ValueError(
                f"`model` uses attn_implementation={impl!r}; patch_bert_attention replaces eager attention "
                "only (load the model with attn_implementation='eager')")
    AttentionInterface.register(ATTENTION_NAME, sparsekern_eager_attention)
    try:  # transformers >= 4.53 builds the mask per implementation: ours wants eager's additive mask
        from transformers.masking_utils import AttentionMaskInterface, eager_mask

        AttentionMaskInterface.register(ATTENTION_NAME, eager_mask)
    except ImportError:  # pragma: no cover - older transformers build one mask for all
        pass
    for cfg in configs.values():
        cfg._attn_implementation = ATTENTION_NAME
    if getattr(model, "config", None) is not None and id(model.config) not in configs:
        model.config._attn_implementation = ATTENTION_NAME
    return len(attn)
