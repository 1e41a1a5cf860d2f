"""``torch.nn`` modules backed by sparsekern kernels.

Block-sparse part (issue 3): :class:`BlockSparseLinear`, a drop-in ``nn.Linear`` whose weight is
block-sparse; :class:`BlockSparseModelPatcher`, which swaps chosen ``nn.Linear`` layers of a model
for it; and :func:`prune_and_regrow_model`, the pattern-learning step.

Pattern learning in a training loop (density stays constant; Adam moments follow their blocks)::

    layer = sparsekern.BlockSparseLinear(1024, 1024, density=0.25, block_size=32)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step, batch in enumerate(loader):
        loss = model(batch).sum(); loss.backward(); opt.step(); opt.zero_grad()
        if step % 100 == 99:   # drop the 10% weakest blocks of every layer, grow as many elsewhere
            sparsekern.nn.prune_and_regrow_model(model, 0.1, optimizer=opt)
"""
from __future__ import annotations

import math
import numbers
import re
import warnings
import weakref
from typing import Optional

import torch
from torch import nn

from . import bsr as _bsr
from ._core import traced, version_of

__all__ = ["BlockSparseLinear", "BlockSparseModelPatcher", "prune_and_regrow_model"]


class BlockSparseLinear(nn.Module):
    """``y = x · Wᵀ + b`` with ``W`` (out_features × in_features) block-sparse.

    Mirrors ``nn.Linear``: attributes ``in_features``, ``out_features``, ``weight``, ``bias``; any
    leading batch dims on the input; gradients for the input, the weight blocks and the bias. The
    trainable ``weight`` is the ``(nnz_blocks, b, b)`` tensor of non-zero blocks; the pattern lives
    in the ``block_row_offsets`` / ``block_col_indices`` buffers (saved in the ``state_dict``; the
    other index sets are derived). ``weight_matrix`` is the :class:`~sparsekern.BlockSparseMatrix`
    view, ``dense_weight()`` the dense ``W``.

    ``density`` (in (0, 1]) sets round(density · blocks) non-zero blocks (at least one), drawn at
    random; ``block_size`` is 16, 32, 64 or 128 and must divide both feature counts.
    """

    __constants__ = ["in_features", "out_features", "block_size"]

    def __init__(self, in_features: int, out_features: int, bias: bool = True, density: float = 0.5,
                 block_size: int = 32, device=None, dtype=None, *,
                 generator: Optional[torch.Generator] = None, _mask: Optional[torch.Tensor] = None):
        super().__init__()
        b = _bsr.check_block_size(block_size)
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v <= 0 or v % b:
                raise ValueError(f"`{name}` must be a positive multiple of `block_size` ({b}); got {v!r}")
        _bsr.check_density(density)
        in_features, out_features = int(in_features), int(out_features)
        # Parameters and index buffers on one device: the given one, else torch's default (which
        # `with torch.device(...)` sets; the buffers once stayed on the CPU there).
        dev = torch.device(device) if device is not None else torch.get_default_device()
        if dev.type == "meta":
            raise ValueError("BlockSparseLinear cannot be made on the meta device: its block pattern is data "
                             "(index buffers) that `to_empty()` would leave uninitialised; make it on the CPU "
                             "or the GPU (or patch the model after its weights are loaded)")
        self.in_features = in_features
        self.out_features = out_features
        self.block_size = b
        factory = {"device": dev, "dtype": dtype}
        rb, cb = out_features // b, in_features // b
        mask = _mask if _mask is not None else _bsr.random_mask(rb, cb, density, generator=generator)
        offsets, cols = _bsr._pattern_from_mask(mask.cpu())
        self.weight = nn.Parameter(torch.empty(int(cols.numel()), b, b, **factory))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features, **factory))
        else:
            self.register_parameter("bias", None)
        self.register_buffer("block_row_offsets", offsets.to(dev))
        self.register_buffer("block_col_indices", cols.to(dev))
        self._register_derived()
        self.reset_parameters(generator=generator)

    def _register_derived(self) -> None:
        """The four index sets derived from the stored two, as buffers; written into the existing
        ones where their shapes agree (a checkpoint with the same number of blocks), so that a CUDA
        graph captured before a load_state_dict keeps valid pointers and reads the loaded pattern
        (new tensors would leave it reading freed memory)."""
        rb, cb = self.out_features // self.block_size, self.in_features // self.block_size
        derived = _bsr._derive_index_sets(self.block_row_offsets, self.block_col_indices, rb, cb)
        for name, t in zip(_bsr._INDEX_NAMES[2:], derived):
            old = self._buffers.get(name)
            if old is not None and old.shape == t.shape and old.dtype == t.dtype and old.device == t.device:
                with torch.no_grad():
                    old.copy_(t)
            else:
                self.register_buffer(name, t, persistent=False)
        self._record_index(tuple(self._buffers[n] for n in _bsr._INDEX_NAMES))

    def _record_index(self, index: tuple) -> None:
        """Remembers which tensors (and which versions of the two stored sets) the derived sets
        belong to: ids for the fast test, weak references since CPython gives a new tensor the id
        of a freed one, version counters for an in-place change of the stored sets."""
        self.__dict__["_index_ids"] = tuple(map(id, index))
        self.__dict__["_index_refs"] = tuple(map(weakref.ref, index))
        self.__dict__["_index_versions"] = (version_of(index[0]), version_of(index[1]))

    def _call_index(self, index: tuple) -> tuple:
        """The six index sets of a call. Where the two stored sets are other tensors than the ones
        the four derived sets were made from, while the derived ones are not (a
        ``torch.func.functional_call`` with another layer's ``state_dict``, an assignment to
        ``block_col_indices``), the derived sets are made from the stored ones for this call:
        the stale ones gave silently wrong gradients. Where the stored sets were changed in place
        (``block_col_indices.copy_(...)``), the layer's derived sets are made again. Where all six
        changed together (``.to()``, a copy), they are taken as they are."""
        ids = tuple(map(id, index))
        seen = self.__dict__.get("_index_ids")
        if ids == seen:
            refs = self.__dict__["_index_refs"]
            if refs[0]() is index[0] and refs[1]() is index[1]:
                try:  # (Tensor._version raises for inference tensors: version_of's -1 there)
                    versions = (index[0]._version, index[1]._version)
                except RuntimeError:
                    versions = (version_of(index[0]), version_of(index[1]))
                if versions == self.__dict__["_index_versions"]:
                    return index
                # The recorded stored sets, changed in place: derive again (into the layer's own
                # derived sets where these are the layer's, else for this call).
                self._check_stored(index)
                b = self._buffers
                if index[0] is b.get("block_row_offsets") and index[1] is b.get("block_col_indices"):
                    self._register_derived()
                    return tuple(b[n] for n in _bsr._INDEX_NAMES)
                return self._derived_for_call(index)
            # Same ids, other tensors: a new stored set took a freed one's id.
        if seen is not None and (ids[:2] != seen[:2] or ids == seen) and ids[2:] == seen[2:]:
            if not self._check_stored(index):
                return index  # the op's checks refuse it, naming the set
            return self._derived_for_call(index)
        self._record_index(index)
        return index

    def _derived_for_call(self, index: tuple) -> tuple:
        """`index` with its four derived sets made from its two stored ones (not kept)."""
        rb, cb = self.out_features // self.block_size, self.in_features // self.block_size
        return index[:2] + tuple(_bsr._derive_index_sets(index[0], index[1], rb, cb))

    def _check_stored(self, index: tuple) -> bool:
        """Validates the two stored sets of `index` (raising on a bad pattern); False where they are
        not int32 vectors on the derived sets' device, which the op's own checks refuse by name."""
        if not self._stored_typed(index):
            return False
        _bsr._validate_index_sets(int(index[1].numel()), self.out_features, self.in_features, self.block_size,
                                  {"block_row_offsets": index[0], "block_col_indices": index[1]})
        return True

    @staticmethod
    def _stored_typed(index: tuple) -> bool:
        """Whether the two stored sets of `index` are int32 vectors on the derived sets' device."""
        return all(isinstance(t, torch.Tensor) and t.dtype == torch.int32 and t.dim() == 1
                   and t.device == index[2].device for t in index[:2])

    def reset_parameters(self, generator: Optional[torch.Generator] = None) -> None:
        """``nn.Linear``'s initialisation: U(-1/√in, 1/√in) for the blocks and the bias."""
        bound = 1.0 / math.sqrt(self.in_features)
        with torch.no_grad():
            w = torch.rand(self.weight.shape, generator=generator, dtype=torch.float32, device="cpu") * 2 - 1
            self.weight.copy_(w * bound)
            if self.bias is not None:
                bvals = torch.rand(self.bias.shape, generator=generator, dtype=torch.float32, device="cpu") * 2 - 1
                self.bias.copy_(bvals * bound)

    # -- views ---------------------------------------------------------------------------------
    @property
    def weight_matrix(self) -> _bsr.BlockSparseMatrix:
        """The weight as a BlockSparseMatrix (out_features × in_features) sharing this module's
        parameter and buffers."""
        m = _bsr.BlockSparseMatrix.__new__(_bsr.BlockSparseMatrix)
        m.values = self.weight
        for name in _bsr._INDEX_NAMES:
            setattr(m, name, getattr(self, name))
        m.block_size = self.block_size
        m._storage_shape = (self.out_features, self.in_features)
        m.transposed = False
        return m

    @property
    def nnz_blocks(self) -> int:
        return int(self.weight.shape[0])

    @property
    def density(self) -> float:
        total = (self.out_features // self.block_size) * (self.in_features // self.block_size)
        return self.nnz_blocks / total

    def dense_weight(self) -> torch.Tensor:
        """The dense (out_features × in_features) weight (differentiable in ``weight``)."""
        return self.weight_matrix.to_dense()

    # -- compute -------------------------------------------------------------------------------
    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 - nn.Linear's name
        # y = x · Wᵀ + b = dds(x, W.t(), b), without building the matrix view: at low density the
        # host time of a call exceeds the kernel's (issue 3), and the view cost ~5 µs of it.
        if type(self) is BlockSparseLinear and not traced():
            try:
                # The parameter and buffer dicts read directly (what nn.Module.__getattr__ does,
                # ~0.5 µs per name): always the current tensors, so nothing here can go stale
                # (.to(), load_state_dict, prune_and_regrow). Only for this exact class: a subclass
                # (torch.nn.utils.parametrize makes one) may put a property in front of a name.
                p, b = self._parameters, self._buffers
                weight, bias = p["weight"], p["bias"]
                index = self._call_index(tuple(map(b.__getitem__, _bsr._INDEX_NAMES)))
            except KeyError:  # a name moved out of the dicts (old-style weight_norm, for one)
                pass
            else:
                return _bsr._dds_batched(input, weight, index, self.out_features, self.in_features,
                                         True, bias)
        m = self.weight_matrix
        index = tuple(getattr(m, n) for n in _bsr._INDEX_NAMES)
        index = self._traced_index(index) if traced() else self._call_index(index)
        for name, t in zip(_bsr._INDEX_NAMES, index):
            setattr(m, name, t)
        return _bsr.dds(input, m.t(), self.bias)

    def _traced_index(self, index: tuple) -> tuple:
        """_call_index for torch.compile / torch.jit.trace: the ids and version counters it reads
        are invisible to tracing (a compiled ``functional_call`` with another pattern read the
        layer's own derived sets: a wrong input gradient on the GPU, an error on the CPU). Identity
        (`is`) against weak references to the recorded sets is what Dynamo evaluates and guards
        (a call whose answer differs from the traced one recompiles), so the same rule is made
        from that alone: stored sets other than the recorded ones beside the recorded derived sets
        are derived in the graph for the call. (An in-place change of the stored sets, which
        eager calls notice by their version counters, is not seen here.)"""
        refs = self.__dict__.get("_index_refs")
        if refs is None or len(refs) != len(index):
            return index
        same = [t is r() for t, r in zip(index, refs)]
        if same[0] and same[1]:
            return index
        if not all(same[2:]):
            return index  # all six replaced together (.to(), a copy): taken as they are
        if not self._stored_typed(index):
            return index  # the op's checks refuse it, naming the set
        return index[:2] + tuple(_bsr._index_sets_for_call(index[0], index[1], self.out_features,
                                                           self.in_features, self.block_size))

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, density={self.density:.3g}, block_size={self.block_size}")

    # -- construction from / conversion to nn.Linear --------------------------------------------
    @classmethod
    def from_dense(cls, linear: nn.Linear, density: float, block_size: int = 32) -> "BlockSparseLinear":
        """Keeps the round(density · blocks) blocks of ``linear.weight`` with the largest norm."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"`linear` must be an nn.Linear; got {type(linear).__name__}")
        b = _bsr.check_block_size(block_size)
        _bsr.check_density(density)
        w = linear.weight.detach()
        out_f, in_f = w.shape
        for name, v in (("in_features", in_f), ("out_features", out_f)):
            if v % b:
                raise ValueError(f"`block_size` {b} must divide the layer's {name} ({v})")
        rb, cb = out_f // b, in_f // b
        norms = w.reshape(rb, b, cb, b).float().pow(2).sum(dim=(1, 3))
        mask = _bsr._top_blocks(norms, density)
        layer = cls(in_f, out_f, bias=linear.bias is not None, density=density, block_size=b,
                    device=w.device, dtype=w.dtype, _mask=mask)
        with torch.no_grad():
            grid = w.reshape(rb, b, cb, b).permute(0, 2, 1, 3)
            layer.weight.copy_(grid[layer.block_row_indices.long(), layer.block_col_indices.long()])
            if linear.bias is not None:
                layer.bias.copy_(linear.bias.detach())
        return layer

    def to_dense_linear(self) -> nn.Linear:
        """An ``nn.Linear`` computing the same function."""
        lin = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None,
                        device=self.weight.device, dtype=self.weight.dtype)
        with torch.no_grad():
            lin.weight.copy_(self.dense_weight())
            if self.bias is not None:
                lin.bias.copy_(self.bias)
        return lin

    # -- pattern learning ----------------------------------------------------------------------
    def prune_and_regrow(self, fraction: float, *, optimizer=None,
                         grow_scores: Optional[torch.Tensor] = None,
                         generator: Optional[torch.Generator] = None) -> dict:
        """See :func:`sparsekern.bsr.prune_and_regrow` (in place; density constant)."""
        return _bsr.prune_and_regrow(self.weight_matrix, fraction, optimizer=optimizer,
                                     grow_scores=grow_scores, generator=generator)

    # -- state_dict: a checkpoint may carry another pattern (and another nnz) --------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        # The layer's size, in the module's metadata (kept by torch.save): a pattern of a layer
        # with fewer input features is a valid pattern of this one, so the tensors alone cannot
        # tell a checkpoint of another layer from one of this layer with another density.
        meta = getattr(destination, "_metadata", None)
        if meta is not None:
            meta.setdefault(prefix[:-1], {})["features"] = (self.out_features, self.in_features, self.block_size)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        mine = (self.out_features, self.in_features, self.block_size)
        saved = local_metadata.get("features") if isinstance(local_metadata, dict) else None
        if saved is not None and tuple(saved) != mine:
            o, i, b = saved
            error_msgs.append(f"size mismatch for {prefix or 'the layer'}: the checkpoint is a {i} -> {o} "
                              f"BlockSparseLinear with {b}x{b} blocks, this layer is {self.in_features} -> "
                              f"{self.out_features} with {self.block_size}x{self.block_size} blocks")
            return
        key_w, key_o, key_c = prefix + "weight", prefix + "block_row_offsets", prefix + "block_col_indices"
        has_o, has_c = key_o in state_dict, key_c in state_dict
        if has_o != has_c:  # half a pattern (strict=False lets a missing key through)
            error_msgs.append(f"{prefix or 'the layer'}: the checkpoint holds {key_o if has_o else key_c} but not "
                              f"{key_c if has_o else key_o}: a block pattern needs both, or neither")
            return
        if has_o:
            w, offsets, cols = state_dict.get(key_w), state_dict[key_o], state_dict[key_c]
            rb = self.out_features // self.block_size
            fits = (isinstance(offsets, torch.Tensor) and isinstance(cols, torch.Tensor) and
                    offsets.shape == (rb + 1,) and cols.dim() == 1)
            if fits and w is not None:
                fits = w.dim() == 3 and w.shape[1:] == self.weight.shape[1:] and w.shape[0] == cols.numel()
            if not fits:
                error_msgs.append(f"{prefix or 'the layer'}: the checkpoint's block pattern does not fit a "
                                  f"{self.out_features}x{self.in_features} layer with "
                                  f"{self.block_size}x{self.block_size} blocks")
                return
            if w is None and cols.numel() != self.weight.shape[0]:
                error_msgs.append(f"{prefix or 'the layer'}: the checkpoint's pattern has {cols.numel()} blocks and "
                                  f"no {key_w} for them (this layer's weight has {self.weight.shape[0]})")
                return
            _bsr._validate_index_sets(int(cols.numel()), self.out_features, self.in_features,
                                      self.block_size, {"block_row_offsets": offsets,
                                                        "block_col_indices": cols})
            if w is not None and w.shape != self.weight.shape:
                # Another nnz: a new weight Parameter of the checkpoint's shape (then loaded).
                # Resizing the old one through .data left autograd's cached gradient accumulator
                # of that Parameter with the old shape whenever an earlier graph still held it:
                # the next backward failed ("invalid gradient ... expected shape compatible with
                # [2, 32, 32]", H200, 2026-11-22). An optimizer holding the old Parameter must be
                # rebuilt anyway: its state has the old number of blocks.
                self.weight = nn.Parameter(self.weight.detach().new_empty(w.shape),
                                           requires_grad=self.weight.requires_grad)
                self.block_col_indices = self.block_col_indices.new_empty(cols.shape)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        self._register_derived()


def _count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


class BlockSparseModelPatcher:
    """Replaces chosen ``nn.Linear`` layers of a model by :class:`BlockSparseLinear`.

    ::

        mp = BlockSparseModelPatcher()
        mp.add_pattern(r"encoder\\.layer\\.[0-9]+\\.intermediate\\.dense", {"density": 0.5, "block_size": 32})
        report = mp.patch_model(model)   # {"parameters_before": ..., "parameters_after": ..., ...}

    Patterns are regular expressions searched (``re.search``) in the module names of
    ``model.named_modules()``; the first matching pattern wins. Patched layers keep the dense
    layer's highest-norm blocks (``BlockSparseLinear.from_dense``) and its bias.
    """

    _KEYS = {"density", "block_size"}

    def __init__(self):
        self.patterns: list[tuple[re.Pattern, dict]] = []
        self.report: Optional[dict] = None

    def add_pattern(self, pattern: str, patch_info: dict) -> None:
        if not isinstance(pattern, str):
            raise TypeError(f"`pattern` must be a regular expression string; got {type(pattern).__name__}")
        if not isinstance(patch_info, dict) or "density" not in patch_info:
            raise ValueError("`patch_info` must be a dict with a 'density' (and optionally 'block_size')")
        unknown = set(patch_info) - self._KEYS
        if unknown:
            raise ValueError(f"`patch_info` has unknown keys {sorted(unknown)}; expected {sorted(self._KEYS)}")
        info = {"density": _bsr.check_density(patch_info["density"]),
                "block_size": _bsr.check_block_size(patch_info.get("block_size", 32))}
        try:
            regex = re.compile(pattern)
        except re.error as e:
            raise ValueError(f"`pattern` is not a valid regular expression: {e}") from None
        self.patterns.append((regex, info))

    def _match(self, name: str) -> Optional[dict]:
        for regex, info in self.patterns:
            if regex.search(name):
                return info
        return None

    @torch.no_grad()
    def patch_model(self, model: nn.Module) -> dict:
        """Patches ``model`` in place; returns (and keeps in ``self.report``) the parameter counts
        before/after and the patched layer names.

        Every layer is converted before any is swapped in, so a layer the block size does not fit
        raises (naming it) with the model unchanged. A layer reachable under several names (a
        shared module) is replaced under all of them by one new layer when any of its names
        matches. The new layers keep the old ones' ``requires_grad`` and training mode. A layer whose
        weight or bias is also another module's (tied weights, e.g. an LM head tied to the
        embedding) is refused by name; hooks on a replaced layer are not carried over (a warning
        names the layer)."""
        if not isinstance(model, nn.Module):
            raise TypeError(f"`model` must be an nn.Module; got {type(model).__name__}")
        if type(model) is nn.Linear:
            raise ValueError("`model` is itself an nn.Linear: patch_model swaps submodules in place, so it "
                             "cannot replace the model object; use BlockSparseLinear.from_dense(model, ...)")
        before = _count_parameters(model)
        # Every (parent, attribute) that holds a Linear, under every name (shared modules included).
        names: dict[int, list[str]] = {}
        slots: dict[int, list[tuple[nn.Module, str]]] = {}
        modules: dict[int, nn.Module] = {}
        for parent_name, parent in model.named_modules(remove_duplicate=False):
            for child_name, child in parent._modules.items():  # named_children() skips repeats
                if type(child) is nn.Linear:
                    key = id(child)
                    full = f"{parent_name}.{child_name}" if parent_name else child_name
                    modules[key] = child
                    slots.setdefault(key, []).append((parent, child_name))
                    if full not in names.setdefault(key, []):
                        names[key].append(full)
        owners: dict[int, list[str]] = {}  # parameter -> every name it has (tied weights have several)
        for pname, param in model.named_parameters(remove_duplicate=False):
            owners.setdefault(id(param), []).append(pname)
        plan = []
        for key, module in modules.items():
            info = next((i for i in map(self._match, names[key]) if i is not None), None)
            if info is None:
                continue
            for pname, param in (("weight", module.weight), ("bias", module.bias)):
                if param is None:
                    continue
                own = {f"{n}.{pname}" for n in names[key]}
                others = [n for n in owners.get(id(param), []) if n not in own]
                if others:
                    raise ValueError(f"cannot patch {names[key][0]!r}: its {pname} is shared with {others[0]!r} "
                                     "(tied weights); a block-sparse copy would untie them. Leave it out of the "
                                     "patterns; the model was left unchanged")
            hooks = [h for h in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
                                 "_state_dict_hooks", "_load_state_dict_pre_hooks") if getattr(module, h, None)]
            if hooks:
                warnings.warn(f"{names[key][0]!r} has hooks ({', '.join(h.strip('_') for h in hooks)}); they stay on "
                              "the nn.Linear it is replaced by and will not run on the BlockSparseLinear",
                              RuntimeWarning, stacklevel=2)
            try:
                new = BlockSparseLinear.from_dense(module, info["density"], info["block_size"])
            except ValueError as e:
                raise ValueError(f"cannot patch {names[key][0]!r} ({module.in_features} -> "
                                 f"{module.out_features}): {e}; the model was left unchanged") from None
            new.weight.requires_grad_(module.weight.requires_grad)
            if module.bias is not None:
                new.bias.requires_grad_(module.bias.requires_grad)
            new.train(module.training)
            plan.append((key, module, new))
        patched = []
        for key, module, new in plan:
            for parent, attr in slots[key]:
                setattr(parent, attr, new)
            patched.append({"name": names[key][0], "names": list(names[key]),
                            "shape": (module.out_features, module.in_features),
                            "density": new.density, "block_size": new.block_size,
                            "parameters_before": module.weight.numel(),
                            "parameters_after": new.weight.numel()})
        after = _count_parameters(model)
        self.report = {"parameters_before": before, "parameters_after": after,
                       "ratio": after / before if before else 1.0, "patched": patched}
        return self.report

    def print_report(self, file=None) -> None:
        if self.report is None:
            raise RuntimeError("patch_model() has not run yet")
        r = self.report
        print(f"patched {len(r['patched'])} layers: parameters {r['parameters_before']:,} -> "
              f"{r['parameters_after']:,} ({100 * r['ratio']:.1f}%)", file=file)
        for p in r["patched"]:
            print(f"  {p['name']}: {p['shape'][0]}x{p['shape'][1]}, density {p['density']:.3g}, "
                  f"block {p['block_size']}, weights {p['parameters_before']:,} -> {p['parameters_after']:,}",
                  file=file)


def prune_and_regrow_model(model: nn.Module, fraction: float, *, optimizer=None,
                           generator: Optional[torch.Generator] = None) -> dict:
    """Runs :meth:`BlockSparseLinear.prune_and_regrow` on every block-sparse layer of ``model``;
    returns ``{layer name: report}``."""
    return {name: m.prune_and_regrow(fraction, optimizer=optimizer, generator=generator)
            for name, m in model.named_modules() if isinstance(m, BlockSparseLinear)}
