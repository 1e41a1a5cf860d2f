"""`patch_inplace(model)`: BERT/RoBERTa-style transformers models run inference with in-place ops.

What it changes, per site, only where the structure is recognised and a probe agrees:

* self-attention with eager attention: the score matrix is computed once and then overwritten —
  scaling folded into the queries (an S×d tensor instead of a pass over the S×S scores), Q·Kᵀ through
  `matmul_transb` on CUDA (no transposed copy of K), the mask added in place, `inplace_softmax` — so
  attention holds one score matrix instead of two. It replaces the model file's
  `eager_attention_forward` (or, after `patch_bert_attention`, the function that registered) by a
  dispatcher that runs the in-place version only for modules this function patched (others, and
  training with dropout, get the original).
* the `*Output` blocks after attention and after the MLP (`dense → dropout → LayerNorm(h + residual)`):
  the residual is added in place and the LayerNorm runs in place on the fresh sum; the attention
  output projection (square) runs in place too (`inplace_linear`), its input being the attention
  output nobody else holds.
* the embeddings' LayerNorm, whose input is a fresh sum of embeddings (BERT, RoBERTa, XLM-R,
  CamemBERT, ELECTRA embeddings; others, such as DeBERTa-v3's, may pass the caller's
  `inputs_embeds` itself and are left alone).

Modules are never replaced (state dicts, hooks and `named_modules` stay as they are): patched sites
get an instance-level `forward`. A site with a forward (pre-)hook on it or on the submodules its
in-place path skips, or while a global forward hook is registered, takes the original path (a hook
may read or keep what the in-place path overwrites); so does the attention output projection of a
model that was saved and loaded or deep-copied after patching (patch it again to restore it). In-place paths run only for inference: module in eval mode (no
dropout), no autograd graph needed for the LayerNorm/linear sites (use torch.no_grad() or
torch.inference_mode()), no autocast, matching dtypes; anything else takes the original code path.
Query/key/value projections, the pooler and heads are left alone: their inputs are still needed
afterwards (residuals, the returned hidden states), so overwriting them would be wrong.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
import weakref
from typing import Callable

import torch
from torch import nn

from ..dense import matmul_transb
from ..inplace import inplace_layer_norm, inplace_linear, inplace_softmax
from .bert import ATTENTION_NAME as _BERT_ATTENTION  # patch_bert_attention's registered eager attention

__all__ = ["patch_inplace", "unpatch_inplace", "InplacePatch"]

# Embeddings whose forward always adds position or token-type embeddings to the word embeddings (or
# the caller's inputs_embeds) before their LayerNorm, so its input is a temporary. DeBERTa-v2/v3's,
# for one, pass inputs_embeds itself when the config has neither (position_biased_input=False,
# type_vocab_size=0): patched, the caller's tensor was normalised in place.
_FRESH_SUM_EMBEDDINGS = {"BertEmbeddings", "RobertaEmbeddings", "XLMRobertaEmbeddings", "CamembertEmbeddings",
                         "ElectraEmbeddings"}
_ATTN_FLAG = "_sparsekern_inplace_attention"
_PATCHED = "_sparsekern_inplace_patched"  # set on modules with an instance-level forward of ours
_EAGER_PARAMS = {"module", "query", "key", "value", "attention_mask", "scaling", "dropout"}


@dataclasses.dataclass
class InplacePatch:
    """What patch_inplace changed (module names) and what it left alone, with the reason."""

    attention: list = dataclasses.field(default_factory=list)
    layer_norms: list = dataclasses.field(default_factory=list)
    linears: list = dataclasses.field(default_factory=list)
    skipped: dict = dataclasses.field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.attention or self.layer_norms or self.linears)


# --------------------------------------------------------------------------------------------
# When may a site run in place?
# --------------------------------------------------------------------------------------------
def _autocast_on(device: torch.device) -> bool:
    try:
        return torch.is_autocast_enabled(device.type)
    except TypeError:  # torch < 2.4 has no device-type argument
        return torch.is_autocast_enabled() if device.type == "cuda" else torch.is_autocast_cpu_enabled()


def _inference(module: nn.Module, *tensors: torch.Tensor) -> bool:
    """Eval mode, no autograd graph wanted, no autocast, one dtype: the in-place path is exact."""
    if module.training:
        return False
    if torch.is_grad_enabled() and (any(t.requires_grad for t in tensors) or
                                    any(p.requires_grad for p in module.parameters())):
        return False
    dtype = tensors[0].dtype
    return all(t.dtype == dtype for t in tensors) and not _autocast_on(tensors[0].device)


_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks")
_module_globals = nn.modules.module


def _hooked(*modules) -> bool:
    """Whether a forward (pre-)hook is registered on any of `modules` or globally: a hook may keep
    or read the tensors the in-place path overwrites, and the in-place paths call no submodule
    (their hooks would not run), so such a site takes the original path."""
    if _module_globals._global_forward_hooks or _module_globals._global_forward_pre_hooks:
        return True
    return any(m is not None and any(getattr(m, h, None) for h in _HOOK_DICTS) for m in modules)


class _Sibling:
    """A reference to the attention module whose output an output block overwrites (for its hooks).
    Pickles and deep-copies as empty: a loaded or copied model then keeps that projection out of
    place (a stale reference would point at the original model's module)."""

    __slots__ = ("ref",)

    def __init__(self, module=None):
        self.ref = weakref.ref(module) if module is not None else None

    def __call__(self):
        return self.ref() if self.ref is not None else None

    def __reduce__(self):
        return (_Sibling, ())


def _ln_fits(ln: nn.Module, h: torch.Tensor) -> bool:
    return (type(ln) is nn.LayerNorm and tuple(h.shape[-len(ln.normalized_shape):]) == tuple(ln.normalized_shape)
            and (ln.weight is None or ln.weight.dtype == h.dtype) and h.is_contiguous())


# --------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------
def _inplace_eager_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The eager attention of BERT-style models with one S×S buffer; None when it does not apply."""
    if dropout and module.training:
        return None
    if _autocast_on(query.device) or not (query.dtype == key.dtype == value.dtype):
        return None
    if query.shape[:-2] != key.shape[:-2] or key.shape[:-2] != value.shape[:-2]:
        return None  # broadcast heads (grouped queries): not the BERT layout
    if attention_mask is not None:
        scores_shape = torch.Size((*query.shape[:-1], key.shape[-2]))
        try:
            fits = torch.broadcast_shapes(attention_mask.shape, scores_shape) == scores_shape
        except RuntimeError:
            fits = False
        if not fits or attention_mask.dtype != query.dtype:
            return None  # the mask must add in place, in the scores' dtype, as the original's sum does
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    # Scale the S×d queries, not the S×S scores: one pass over the score matrix fewer (exact for
    # the power-of-two scalings of head sizes 64 and 256). cuBLAS reads K transposed in place; on the
    # CPU torch's BLAS is faster than the portable kernel behind matmul_transb.
    q = query * scaling
    scores = matmul_transb(q, key) if q.is_cuda else torch.matmul(q, key.transpose(2, 3))
    if attention_mask is not None:
        scores.add_(attention_mask)
    inplace_softmax(scores, dim=-1)
    attn_output = torch.matmul(scores, value)
    return attn_output.transpose(1, 2).contiguous(), scores


def _make_dispatcher(original: Callable) -> Callable:
    def eager_attention_forward(module, query, key, value, attention_mask, *args, **kwargs):
        if getattr(module, _ATTN_FLAG, False) and not args:
            out = _inplace_eager_attention(module, query, key, value, attention_mask, **kwargs)
            if out is not None:
                return out
        return original(module, query, key, value, attention_mask, *args, **kwargs)

    eager_attention_forward.__doc__ = (original.__doc__ or "") + "\n(sparsekern: in place for patched modules)"
    eager_attention_forward._sparsekern_original = original
    return eager_attention_forward


def _attention_function_of(module: nn.Module):
    """((installed function, original, install) or None, reason) for the eager attention `module` runs:
    the model file's `eager_attention_forward`, or the function patch_bert_attention registered."""
    impl = module.config._attn_implementation
    if impl in (None, "eager"):
        mod = sys.modules.get(type(module).__module__)
        fn = getattr(mod, "eager_attention_forward", None)
        if fn is None:
            return None, f"{type(module).__module__} has no eager_attention_forward"

        def install(d, mod=mod):
            mod.eager_attention_forward = d
    elif impl == _BERT_ATTENTION:
        from transformers import AttentionInterface

        fn = AttentionInterface._global_mapping.get(impl)

        def install(d):
            AttentionInterface.register(_BERT_ATTENTION, d)
    else:
        return None, (f"attention runs through {impl!r}, which does not materialise the score matrix; load "
                      f"the model with attn_implementation='eager' to patch it")
    original = getattr(fn, "_sparsekern_original", fn)
    try:
        params = inspect.signature(original).parameters
    except (TypeError, ValueError):
        return None, "the eager attention function has no inspectable signature"
    names = {n for n, p in params.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    if names != _EAGER_PARAMS:
        return None, f"the eager attention takes {sorted(names)}, not the BERT-style {sorted(_EAGER_PARAMS)}"
    return (fn, original, install), None


def _is_self_attention(m: nn.Module) -> bool:
    return all(isinstance(getattr(m, n, None), nn.Linear) for n in ("query", "key", "value")) and \
        hasattr(getattr(m, "config", None), "_attn_implementation")


def _probe_tensors(m: nn.Module):
    p = next(m.parameters(), None)
    if p is None or p.device.type == "meta":
        return None
    return p.dtype, p.device


def _tol(dtype) -> float:
    return 1e-4 if dtype in (torch.float32, torch.float64) else 3e-2


def _close(a: torch.Tensor, b: torch.Tensor, dtype) -> bool:
    a, b = a.double(), b.double()
    return bool(torch.isfinite(a).all()) and float((a - b).norm()) <= _tol(dtype) * max(float(b.norm()), 1e-30)


def _verify_attention(m: nn.Module, original: Callable) -> str | None:
    """Runs the original and the in-place attention on a small random problem; None if they agree."""
    pt = _probe_tensors(m)
    if pt is None:
        return None
    dtype, device = pt
    heads = int(getattr(m, "num_attention_heads", 2))
    d = int(getattr(m, "attention_head_size", 8))
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (torch.randn(2, heads, 5, d, generator=g).to(device=device, dtype=dtype) for _ in range(3))
    mask = torch.zeros(2, 1, 5, 5, dtype=dtype, device=device)
    mask[1, :, :, 3:] = torch.finfo(dtype).min
    scaling = getattr(m, "scaling", d ** -0.5)
    with torch.no_grad():
        ref_out, ref_w = original(m, q, k, v, mask, dropout=0.0, scaling=scaling)
        got = _inplace_eager_attention(m, q, k, v, mask, dropout=0.0, scaling=scaling)
    if got is None or not (_close(got[0], ref_out, dtype) and _close(got[1], ref_w, dtype)):
        return "in-place attention disagreed with the model's eager attention on a probe"
    return None


# --------------------------------------------------------------------------------------------
# Output blocks (dense → dropout → LayerNorm(h + residual)) and embeddings LayerNorm
# --------------------------------------------------------------------------------------------
def _is_output_block(m: nn.Module) -> bool:
    if not (isinstance(getattr(m, "dense", None), nn.Linear) and type(getattr(m, "LayerNorm", None)) is nn.LayerNorm
            and isinstance(getattr(m, "dropout", None), nn.Dropout)):
        return False
    try:
        params = list(inspect.signature(type(m).forward).parameters)
    except (TypeError, ValueError):
        return False
    return params == ["self", "hidden_states", "input_tensor"]


def _output_forward(self, hidden_states, input_tensor):
    """dense → (dropout: identity in eval) → LayerNorm(h + residual), with h overwritten in place."""
    dense, ln = self.dense, self.LayerNorm
    if not (_inference(self, hidden_states, input_tensor) and type(dense) is nn.Linear and type(ln) is nn.LayerNorm
            and dense.weight.dtype == hidden_states.dtype) or _hooked(self, dense, ln):
        return type(self).forward(self, hidden_states, input_tensor)
    sibling = self.__dict__.get("_sparsekern_inplace_linear")
    attention = sibling() if isinstance(sibling, _Sibling) else None
    if (attention is not None and not _hooked(attention) and dense.in_features == dense.out_features
            and hidden_states.is_contiguous()):
        h = inplace_linear(hidden_states, dense)
    else:
        h = dense(hidden_states)
    if h.shape != input_tensor.shape or not _ln_fits(ln, h):
        return ln(h + input_tensor)
    h.add_(input_tensor)
    return inplace_layer_norm(h, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


def _layer_norm_forward(self, x):
    """nn.LayerNorm.forward, in place on `x` during inference (x must be a temporary: see patch_inplace)."""
    if _inference(self, x) and _ln_fits(self, x) and not _hooked(self):
        return inplace_layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
    return type(self).forward(self, x)


def _set_forward(m: nn.Module, fn) -> None:
    # A partial, not a bound method: a bound method in the instance dict pickles as getattr(m,
    # "forward"), which torch.load could not resolve (the saved model did not load).
    m.forward = functools.partial(fn, m)
    setattr(m, _PATCHED, True)


def _clear_forward(m: nn.Module) -> None:
    if getattr(m, _PATCHED, False):
        del m.forward
        delattr(m, _PATCHED)


class _EvalMode:
    """Temporarily puts a module tree in eval mode, restoring each submodule's own flag after."""

    def __init__(self, m: nn.Module):
        self.modes = [(x, x.training) for x in m.modules()]

    def __enter__(self):
        for x, _ in self.modes:
            x.training = False

    def __exit__(self, *exc):
        for x, mode in self.modes:
            x.training = mode


def _verify_module(m: nn.Module, fn, *shapes) -> str | None:
    """Runs m's class forward and `fn` (our forward) on the same random inputs; None if they agree."""
    pt = _probe_tensors(m)
    if pt is None:
        return None
    dtype, device = pt
    g = torch.Generator(device="cpu").manual_seed(0)
    inputs = [torch.randn(*s, generator=g).to(device=device, dtype=dtype) for s in shapes]
    with torch.no_grad(), _EvalMode(m):
        ref = type(m).forward(m, *inputs)
        got = fn(m, *(t.clone() for t in inputs))
    if not (isinstance(ref, torch.Tensor) and isinstance(got, torch.Tensor) and got.shape == ref.shape
            and _close(got, ref, dtype)):
        return "in-place forward disagreed with the original on a probe"
    return None


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------
def patch_inplace(model: nn.Module, *, attention: bool = True, layer_norm: bool = True, linear: bool = True,
                  verify: bool = True) -> InplacePatch:
    """Make a BERT/RoBERTa-style model run its attention softmax, LayerNorms and the square attention
    output projection in place during inference (see the module docstring for exactly where).

    Args:
        model: any nn.Module; recognised sub-structures are patched, everything else is left alone.
        attention / layer_norm / linear: which kinds of site to patch.
        verify: run each recognised site once on a small random probe against the original code and
            leave it unpatched if they disagree (skipped on the meta device).

    Returns an :class:`InplacePatch` listing the patched module names and the skipped ones with the
    reason (e.g. attention running through SDPA, which already avoids the S×S matrix). Idempotent;
    :func:`unpatch_inplace` undoes it. The model's outputs stay the same within rounding. With
    :func:`patch_bert_attention`, call that one first (it re-registers its attention function, which
    would drop the in-place dispatcher again: results stay right, the memory saving goes).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module; got {type(model).__name__}")
    report = InplacePatch()
    verified: dict = {}  # class -> failure reason or None: probe each class once

    def check(m, probe) -> str | None:
        key = type(m)
        if key not in verified:
            verified[key] = probe() if verify else None
        return verified[key]

    attention_modules = {}
    for name, m in model.named_modules():
        if attention and _is_self_attention(m):
            attention_modules[id(m)] = m
            target, reason = _attention_function_of(m)
            if target is None:
                report.skipped[name] = reason
                continue
            fn, original, install = target
            reason = check(m, lambda m=m, o=original: _verify_attention(m, o))
            if reason:
                report.skipped[name] = reason
                continue
            if not hasattr(fn, "_sparsekern_original"):
                install(_make_dispatcher(original))
            setattr(m, _ATTN_FLAG, True)
            report.attention.append(name)

    for name, m in model.named_modules():
        if layer_norm and _is_output_block(m):
            hidden, inner = m.dense.out_features, m.dense.in_features
            reason = check(m, lambda m=m: _verify_module(m, _output_forward_probe, (2, 3, inner), (2, 3, hidden)))
            if reason:
                report.skipped[name] = reason
                continue
            # The attention output projection (the `.output` beside a `.self` attention) reads the fresh
            # attention output, which nothing else holds: it may be overwritten.
            parent = _parent_of(model, name)
            after_attention = parent is not None and id(getattr(parent, "self", None)) in attention_modules
            inplace_linear_on = bool(linear and after_attention and inner == hidden)
            m._sparsekern_inplace_linear = _Sibling(parent.self) if inplace_linear_on else None
            _set_forward(m, _output_forward)
            report.layer_norms.append(name + ".LayerNorm")
            if inplace_linear_on:
                report.linears.append(name + ".dense")
        elif layer_norm and isinstance(getattr(m, "word_embeddings", None), nn.Embedding) and \
                type(getattr(m, "LayerNorm", None)) is nn.LayerNorm:
            if type(m).__name__ not in _FRESH_SUM_EMBEDDINGS:
                report.skipped[name + ".LayerNorm"] = (
                    f"{type(m).__name__} is not known to pass its LayerNorm a fresh sum (it may pass the caller's "
                    "inputs_embeds itself, which an in-place LayerNorm would overwrite)")
                continue
            ln = m.LayerNorm
            reason = check(ln, lambda ln=ln: _verify_module(ln, _layer_norm_forward, (2, 3) + tuple(ln.normalized_shape)))
            if reason:
                report.skipped[name + ".LayerNorm"] = reason
                continue
            _set_forward(ln, _layer_norm_forward)
            report.layer_norms.append(name + ".LayerNorm")
    model._sparsekern_inplace = report
    return report


def _output_forward_probe(self, hidden_states, input_tensor):
    """_output_forward with the linear forced on (if square), so the probe covers it too."""
    prev = getattr(self, "_sparsekern_inplace_linear", None)
    self._sparsekern_inplace_linear = _Sibling(self)  # any live module: the probe has no attention
    try:
        return _output_forward(self, hidden_states, input_tensor)
    finally:
        if prev is None:
            del self._sparsekern_inplace_linear
        else:
            self._sparsekern_inplace_linear = prev


def _parent_of(model: nn.Module, name: str):
    if not name:
        return None
    parent_name = name.rpartition(".")[0]
    return model.get_submodule(parent_name) if parent_name else model


def unpatch_inplace(model: nn.Module) -> None:
    """Undo :func:`patch_inplace` on `model` (the shared attention dispatcher stays installed; it runs the
    original attention for every module not patched)."""
    for m in model.modules():
        if getattr(m, _ATTN_FLAG, False):
            delattr(m, _ATTN_FLAG)
        _clear_forward(m)
        if hasattr(m, "_sparsekern_inplace_linear"):
            del m._sparsekern_inplace_linear
    if hasattr(model, "_sparsekern_inplace"):
        del model._sparsekern_inplace
