"""Model patchers for Hugging Face transformers models (no transformers import at load time).

    from sparsekern.integrations import patch_bert_attention, patch_inplace
    patch_bert_attention(model)     # Q·Kᵀ through sparsekern.matmul_transb
    report = patch_inplace(model)   # BERT/RoBERTa-style: in-place softmax, LayerNorm, square linears
"""
from .bert import patch_bert_attention
from .inplace import InplacePatch, patch_inplace, unpatch_inplace

__all__ = ["patch_bert_attention", "InplacePatch", "patch_inplace", "unpatch_inplace"]
