"""Accuracy of the in-place 16-bit LayerNorm / RMSNorm under the block-row kernel variant in
SPARSEKERN_INPLACE_NORM_VARIANT (unset: the default dispatch), against float64 and against torch's
own F.layer_norm / F.rms_norm on the same input, for tools/diag/s5_norm.sh.

One line per (dtype, shape, op): relative error (Frobenius) of ours and of torch against float64,
the largest distance of ours and of torch from the float64 result and the largest |ours - torch|,
in units of the output dtype's eps times |exact value| ("ulp"), how many outputs differ from torch
at all, and whether torch.testing.assert_close (default tolerances) accepts ours against torch's. The shapes cover the rows the block-row kernels take: 4096 columns
(the issue-4 shape), 3072 (rows shorter than the block's words: the fill path), 2048 and 1032.
A last group of "hard" rows (an extreme first element, which is the statistics' shift; a large
common offset; a constant row) checks the shifted statistics against float64.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F

import sparsekern

dev = torch.device("cuda")
gen = torch.Generator(device=dev).manual_seed(0)


def rnd(*shape):
    return torch.randn(*shape, generator=gen, device=dev)


def rel_error(out, ref):
    """sparsekern.testing.rel_error on the device (it copies both to the host: seconds per call
    at 16384 x 4096 in float64): ‖out − ref‖ / ‖ref‖, inf if out is not finite where ref is."""
    out = out.double()
    if not torch.isfinite(out[torch.isfinite(ref)]).all():
        return float("inf")
    return ((out - ref).norm() / ref.norm()).item()


def compare(tag, dtype, ours, theirs, exact, close_check=True):
    ulp = torch.finfo(dtype).eps * exact.abs().clamp_min(torch.finfo(dtype).tiny)
    ulps = lambda t: ((t.double() - exact).abs() / ulp).max().item()  # noqa: E731
    max_ulp = ((ours.double() - theirs.double()).abs() / ulp).max().item()
    differ = (ours != theirs).sum().item()
    close = ""
    if close_check:
        try:
            torch.testing.assert_close(ours, theirs)
            close = " | assert_close ok"
        except AssertionError as e:
            why = [ln.strip() for ln in str(e).splitlines() if "Mismatched" in ln or "Greatest relative" in ln]
            close = " | assert_close FAILS: " + "; ".join(why)
    print(f"{tag} rel {rel_error(ours, exact):.2e} torch {rel_error(theirs, exact):.2e} | ulp from exact "
          f"{ulps(ours):.2f} torch {ulps(theirs):.2f} | vs torch {max_ulp:.2f} ulp, {differ} differ{close}",
          flush=True)


def run(dtype, x, name, close_check=True):
    n = x.shape[-1]
    w, b = rnd(n).to(dtype), rnd(n).to(dtype)
    x64, w64, b64 = x.double(), w.double(), b.double()
    cases = (
        ("layer_norm", lambda t: sparsekern.inplace_layer_norm(t, (n,), w, b),
         lambda t: F.layer_norm(t, (n,), w, b), lambda: F.layer_norm(x64, (n,), w64, b64)),
        ("ln_plain", lambda t: sparsekern.inplace_layer_norm(t, (n,)),
         lambda t: F.layer_norm(t, (n,)), lambda: F.layer_norm(x64, (n,))),
        ("rms_norm", lambda t: sparsekern.inplace_rms_norm(t, (n,), w, 1e-6),
         lambda t: F.rms_norm(t, (n,), w, 1e-6), lambda: F.rms_norm(x64, (n,), w64, 1e-6)),
    )
    for op, ours_fn, torch_fn, exact_fn in cases:
        ours = ours_fn(x.clone())
        compare(f"{str(dtype)[6:]:8s} {name:11s} {op:10s}", dtype, ours, torch_fn(x), exact_fn(), close_check)
        del ours


print("variant", os.environ.get("SPARSEKERN_INPLACE_NORM_VARIANT", "default"), flush=True)
for dtype in (torch.float16, torch.bfloat16):
    for rows, cols in ((16384, 4096), (4096, 3072), (4096, 2048), (4096, 1032)):
        run(dtype, (rnd(rows, cols) * 2 + 0.5).to(dtype), f"{rows}x{cols}")
    hard = rnd(64, 4096).double()
    hard[0:16, 0] = 3000.0  # the shift (first element) an extreme outlier
    hard[16:32] += 500.0  # large offset, small spread
    hard[32:48, 0] = -200.0
    hard[48:56] = 7.0  # constant rows: LayerNorm gives the bias exactly
    # no assert_close here: in rows whose first element is far out, torch (Welford) and the shifted
    # statistics round differently, both within a few units of fp32 rounding of the row's scale
    run(dtype, hard.to(dtype), "hard64x4096", close_check=False)
