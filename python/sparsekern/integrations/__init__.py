"""Model patchers for Hugging Face transformers models."""
from .bert import patch_bert_attention

__all__ = ["patch_bert_attention"]
