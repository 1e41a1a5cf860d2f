"""In-place benchmark cases, each against torch's out-of-place op in the same run.

Rows report the time, the achieved TB/s against a large device-to-device copy measured in the same
run (`copy_tbps`, the ceiling of a read-once/write-once op), and the peak extra device memory of one
call of each side (`extra_mib_ours` / `extra_mib_anchor`, from torch.cuda.max_memory_allocated).
The full grid (`--full` on a GPU) is the issue's: softmax and its backward on (32, 12, 512, 512),
LayerNorm/RMSNorm on 16384×4096, square_matmul 8192×4096·4096×4096, fp16/bf16/fp32, plus rows of
256K elements and BERT-base/large forward (eager attention, batch 32, seq 512, fp16) patched vs not.

In-place calls are timed back to back on the same buffer (softmax of a softmax, LayerNorm of a
normalised tensor, x·w with w orthogonal): the work and traffic per call do not depend on the values.
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F

from .. import (inplace_layer_norm, inplace_linear, inplace_rms_norm, inplace_softmax, inplace_softmax_backward,
                square_matmul, square_matmul_workspace_size)
from ..testing import rel_error, tolerance
from . import Case, time_ms
from . import Tf32


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _extra_mib(fn, device):
    """Peak device memory one call of `fn` allocates beyond what is live before it (CUDA only)."""
    if device.type != "cuda":
        return None
    fn()  # warm-up: workspaces, handles and cached blocks exist before the measured call
    _sync(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    out = fn()
    _sync(device)
    extra = torch.cuda.max_memory_allocated(device) - base
    del out
    return extra / 2**20


def _copy_case(device, quick):
    """Device-to-device copy of a buffer far larger than L2: the bandwidth ceiling, in this run."""
    nbytes = (64 << 20) if (quick or device.type == "cpu") else (1 << 30)
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy_fn = lambda: dst.copy_(src)  # noqa: E731
    tbps = 2 * nbytes / time_ms(copy_fn, device) / 1e9
    case = Case("inplace", "device copy (ceiling)", f"{nbytes >> 20} MiB", "u8", copy_fn, copy_fn,
                anchor_name="copy_", bytes=2 * nbytes, extra={"copy_tbps": tbps})
    return case, tbps


def _randn(shape, dtype, device, gen):
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)


def _row_cases(device, dtype, label, shape, ln_shape, copy_tbps, gen, out):
    elem = torch.empty((), dtype=dtype).element_size()
    tol = tolerance(dtype)

    def extra(ours, anchor):
        return {"copy_tbps": copy_tbps, "extra_mib_ours": _extra_mib(ours, device),
                "extra_mib_anchor": _extra_mib(anchor, device)}

    # softmax
    x = _randn(shape, dtype, device, gen) * 3
    x2 = x.clone()  # the anchor's input, never overwritten: the reference is computed from it
    ours = lambda x=x: inplace_softmax(x)  # noqa: E731
    anchor = lambda x2=x2: torch.softmax(x2, -1)  # noqa: E731
    numel = x.numel()
    out.append(Case("inplace", "softmax", str(tuple(shape)), label, ours, anchor, anchor_name="torch.softmax",
                    bytes=2 * numel * elem, tol=tol, extra=extra(ours, anchor),
                    verify=lambda x2=x2: rel_error(inplace_softmax(x2.clone()), torch.softmax(x2.double(), -1))))

    # softmax backward: grad ← y·(grad − Σ grad·y)
    y = torch.softmax(_randn(shape, torch.float32, device, gen), -1).to(dtype)
    g = _randn(shape, dtype, device, gen)
    g2 = g.clone()
    ours = lambda g=g, y=y: inplace_softmax_backward(g, y)  # noqa: E731
    anchor = lambda g2=g2, y=y: torch._softmax_backward_data(g2, y, -1, dtype)  # noqa: E731

    def verify_bwd(g2=g2, y=y):
        y64, g64 = y.double(), g2.double()
        ref = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True))
        return ((inplace_softmax_backward(g2.clone(), y).double() - ref).norm() / (y64 * g64).norm()).item()

    out.append(Case("inplace", "softmax backward", str(tuple(shape)), label, ours, anchor,
                    anchor_name="torch._softmax_backward_data", bytes=3 * numel * elem, tol=2 * tol,
                    extra=extra(ours, anchor), verify=verify_bwd))
    del y, g, g2, x, x2

    # layer_norm and rms_norm with the affine
    n = ln_shape[-1]
    x = _randn(ln_shape, dtype, device, gen) + 1
    x2 = x.clone()
    w, b = _randn((n,), dtype, device, gen), _randn((n,), dtype, device, gen)
    ours = lambda x=x: inplace_layer_norm(x, (n,), w, b)  # noqa: E731
    anchor = lambda x2=x2: F.layer_norm(x2, (n,), w, b)  # noqa: E731
    out.append(Case("inplace", "layer_norm", str(tuple(ln_shape)), label, ours, anchor,
                    anchor_name="F.layer_norm", bytes=2 * x.numel() * elem, tol=tol, extra=extra(ours, anchor),
                    verify=lambda x2=x2: rel_error(inplace_layer_norm(x2.clone(), (n,), w, b),
                                                   F.layer_norm(x2.double(), (n,), w.double(), b.double()))))
    eps = torch.finfo(dtype).eps
    ours = lambda x=x: inplace_rms_norm(x, (n,), w, eps)  # noqa: E731
    anchor = lambda x2=x2: F.rms_norm(x2, (n,), w, eps)  # noqa: E731
    out.append(Case("inplace", "rms_norm", str(tuple(ln_shape)), label, ours, anchor,
                    anchor_name="F.rms_norm", bytes=2 * x.numel() * elem, tol=tol, extra=extra(ours, anchor),
                    verify=lambda x2=x2: rel_error(inplace_rms_norm(x2.clone(), (n,), w, eps),
                                                   F.rms_norm(x2.double(), (n,), w.double(), eps))))


def _matmul_cases(device, dtype, label, tf32, shape, copy_tbps, gen, out):
    mode = Tf32(tf32)
    rows, n = shape
    x = _randn(shape, dtype, device, gen)
    x2 = x.clone()
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, device=device, dtype=torch.float32))
    w = q.to(dtype)  # orthogonal: repeated x ← x·w keeps |x| while the benchmark loops
    ours = mode.wrap(lambda: square_matmul(x, w))
    anchor = mode.wrap(lambda: torch.matmul(x2, w))

    def verify():
        ref = x2.double() @ w.double()
        return rel_error(mode.wrap(lambda: square_matmul(x2.clone(), w))(), ref)

    extra = {"extra_mib_ours": _extra_mib(ours, device), "extra_mib_anchor": _extra_mib(anchor, device),
             "workspace_mib": square_matmul_workspace_size(x) / 2**20}
    out.append(Case("inplace", "square_matmul", f"{shape}·({n}, {n})", label, ours, anchor,
                    anchor_name="torch.matmul", flops=2.0 * rows * n * n, tol=tolerance(dtype, tf32), extra=extra,
                    verify=verify))


def _linear_case(device, dtype, label, tf32, shape, gen, out):
    """The attention output projection of BERT-base (the square linear patch_inplace runs in place)."""
    mode = Tf32(tf32)
    n = shape[-1]
    lin = torch.nn.Linear(n, n, device=device, dtype=dtype).requires_grad_(False)
    with torch.no_grad():
        lin.weight.copy_(torch.linalg.qr(torch.randn(n, n, generator=gen, device=device))[0].to(dtype))
    x = _randn(shape, dtype, device, gen)
    x2 = x.clone()
    ours = mode.wrap(lambda: inplace_linear(x, lin))
    anchor = mode.wrap(lambda: F.linear(x2, lin.weight, lin.bias))
    verify = lambda: rel_error(mode.wrap(lambda: inplace_linear(x2.clone(), lin))(),  # noqa: E731
                               F.linear(x2.double(), lin.weight.double(), lin.bias.double()))
    out.append(Case("inplace", "inplace_linear", f"{shape}·({n}, {n})ᵀ+b", label, ours, anchor,
                    anchor_name="F.linear", flops=2.0 * math.prod(shape) * n, tol=tolerance(dtype, tf32),
                    extra={"extra_mib_ours": _extra_mib(ours, device), "extra_mib_anchor": _extra_mib(anchor, device)},
                    verify=verify))


def _bert_cases(device, out):
    """BERT-base / BERT-large forward, eager attention, batch 32, seq 512, fp16: patched vs unpatched."""
    try:
        import transformers
    except ImportError:
        return
    from ..integrations import patch_inplace

    gen = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(1000, 30000, (32, 512), generator=gen).to(device)
    mask = torch.ones(32, 512, dtype=torch.long)
    mask[::2, 448:] = 0  # padding on half the batch: the additive mask path is exercised
    mask = mask.to(device)
    for name, kw in (("bert-base", {}),
                     ("bert-large", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                         intermediate_size=4096))):
        cfg = transformers.BertConfig(attn_implementation="eager", **kw)
        plain = transformers.BertModel(cfg).to(device=device, dtype=torch.float16).eval()
        patched = copy.deepcopy(plain)
        report = patch_inplace(patched)

        def run(model):
            def fn():
                with torch.inference_mode():
                    return model(ids, attention_mask=mask).last_hidden_state
            return fn

        ours, anchor = run(patched), run(plain)
        ref = anchor()
        extra = {"extra_mib_ours": _extra_mib(ours, device), "extra_mib_anchor": _extra_mib(anchor, device),
                 "patched": {"attention": len(report.attention), "layer_norms": len(report.layer_norms),
                             "linears": len(report.linears)}}
        # Reference: the unpatched fp16 model (both round differently from float64 by far more than
        # they differ from each other).
        out.append(Case("inplace", f"{name} forward (patch_inplace)", "32x512 eager", "fp16", ours, anchor,
                        anchor_name="unpatched", tol=2e-2, extra=extra,
                        verify=lambda ours=ours, ref=ref: rel_error(ours(), ref.double())))


def cases(device: torch.device, quick: bool) -> list[Case]:
    gen = torch.Generator(device=device).manual_seed(0)
    out: list[Case] = []
    copy_case, copy_tbps = _copy_case(device, quick)
    out.append(copy_case)
    if device.type == "cpu":
        grid = [("fp32", torch.float32, False)]
        row_shape, ln_shape, long_rows, mm_shape, lin_shape = (4, 4, 64, 128), (256, 512), None, (512, 256), (2, 64, 96)
    elif quick:
        grid = [("fp16", torch.float16, False), ("fp32", torch.float32, False)]
        row_shape, ln_shape, long_rows, mm_shape, lin_shape = (8, 12, 256, 512), (4096, 4096), None, (2048, 2048), \
            (4, 512, 768)
    else:
        grid = [("fp16", torch.float16, False), ("bf16", torch.bfloat16, False), ("fp32", torch.float32, False)]
        row_shape, ln_shape, long_rows, mm_shape, lin_shape = (32, 12, 512, 512), (16384, 4096), (256, 262144), \
            (8192, 4096), (32, 512, 768)
    for label, dtype, _ in grid:
        _row_cases(device, dtype, label, row_shape, ln_shape, copy_tbps, gen, out)
        if long_rows is not None:
            x = _randn(long_rows, dtype, device, gen)
            x2 = x.clone()
            elem = x.element_size()
            ours = lambda x=x: inplace_softmax(x)  # noqa: E731
            anchor = lambda x2=x2: torch.softmax(x2, -1)  # noqa: E731
            out.append(Case("inplace", "softmax (256K rows)", str(long_rows), label, ours, anchor,
                            anchor_name="torch.softmax", bytes=2 * x.numel() * elem, tol=tolerance(dtype),
                            extra={"copy_tbps": copy_tbps, "extra_mib_ours": _extra_mib(ours, device),
                                   "extra_mib_anchor": _extra_mib(anchor, device)},
                            verify=lambda x2=x2: rel_error(inplace_softmax(x2.clone()), torch.softmax(x2.double(), -1))))
    mm_grid = grid if device.type == "cpu" else [g for g in grid if g[1] != torch.float32] + \
        [("tf32", torch.float32, True)]
    for label, dtype, tf32 in mm_grid:
        _matmul_cases(device, dtype, label, tf32, mm_shape, copy_tbps, gen, out)
        _linear_case(device, dtype, label, tf32, lin_shape, gen, out)
    if device.type == "cuda" and not quick:
        _bert_cases(device, out)
    return out
