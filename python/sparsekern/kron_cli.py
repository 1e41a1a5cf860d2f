"""`sparsekern kron`: the Kronecker seed's driver, comparing three implementations of x·(F1⊗…⊗Fn).

    sparsekern kron [--dtype {f,d,h,b}] batch_size factor [factor ...] {check,profile,bench}

A factor `32` is 32×32, `32x16` is p×q = 32×16. The implementations:
    v1  materialise torch.kron(F1, …, Fn), then one matmul   (memory ∏p·∏q: skipped when huge)
    v2  one factor at a time in torch: reshape, matmul, transpose (sparsekern.kron.kron_reference)
    v3  sparsekern.kron_matmul (fused kernels)

check    forward and backward of all three: norms, and pairwise agreement (exit 1 on disagreement)
profile  torch.profiler summary of forward+backward of one implementation, and a Chrome trace
bench    torch.utils.benchmark table of v1/v2/v3 (µs), state size, arithmetic intensity, TFLOP/s
"""
from __future__ import annotations

import argparse
import functools
import math
import os
import sys

import torch

DTYPES = {"f": torch.float32, "d": torch.float64, "h": torch.float16, "b": torch.bfloat16}
# v1 forms the (∏p × ∏q) matrix: above this many elements it is skipped (1 GiB of fp32).
V1_MAX_ELEMENTS = 1 << 28


def parse_factor(text: str) -> tuple[int, int]:
    try:
        if "x" in text.lower():
            p, q = (int(v) for v in text.lower().split("x"))
        else:
            p = q = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"factor must look like 32 or 32x16; got {text!r}") from None
    if p <= 0 or q <= 0:
        raise argparse.ArgumentTypeError(f"factor sizes must be positive; got {text!r}")
    return p, q


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    return v


def add_parser(sub) -> argparse.ArgumentParser:
    """Registers `sparsekern kron` on the CLI's subparsers."""
    pk = sub.add_parser(
        "kron", help="compare x·(F1⊗…⊗Fn) implementations: materialised (v1), torch per factor (v2), sparsekern (v3)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    pk.add_argument("--dtype", choices=sorted(DTYPES), default="f",
                    help="f = float32, d = float64, h = float16, b = bfloat16 (default f)")
    pk.add_argument("--device", help="cpu or cuda[:N] (default: cuda if usable, else cpu)")
    pk.add_argument("--tf32", action="store_true", help="allow TF32 in fp32 matmuls (default: off)")
    pk.add_argument("--implementation", choices=["v1", "v2", "v3"], default="v3", help="profile: which one (default v3)")
    pk.add_argument("--trace", help="profile: Chrome trace path (default kron-<impl>-trace.json)")
    pk.add_argument("--iters", type=positive_int, default=10, help="profile: forward+backward iterations (default 10)")
    pk.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    pk.add_argument("batch_size", type=positive_int)
    pk.add_argument("factors", nargs="+", type=parse_factor, metavar="factor")
    pk.add_argument("command", choices=["check", "profile", "bench"])
    pk.set_defaults(handler=main)
    return pk


# --------------------------------------------------------------------------------------------
# The three implementations, and the counts the seed printed
# --------------------------------------------------------------------------------------------
def v1(x, factors):
    return x @ functools.reduce(torch.kron, factors)


def v2(x, factors):
    from .kron import kron_reference

    return kron_reference(x, factors)


def v3(x, factors):
    from .kron import kron_matmul

    return kron_matmul(x, factors)


IMPLS = {"v1": v1, "v2": v2, "v3": v3}


def shuffle_flops(batch: int, shapes) -> float:
    """Useful FLOPs of the factor-at-a-time algorithm (the same work v2 and v3 do)."""
    state = math.prod(p for p, _ in shapes)
    flops = 0.0
    for p, q in reversed(shapes):
        flops += 2.0 * batch * state * q
        state = state // p * q
    return flops


def min_bytes(batch: int, shapes, dtype: torch.dtype) -> float:
    """Bytes that must move at least once: x, y and the factors."""
    es = torch.empty(0, dtype=dtype).element_size()
    P = math.prod(p for p, _ in shapes)
    Q = math.prod(q for _, q in shapes)
    return es * (batch * P + batch * Q + sum(p * q for p, q in shapes))


def largest_state(shapes) -> int:
    """Largest intermediate row length of the factor-at-a-time algorithm."""
    state = best = math.prod(p for p, _ in shapes)
    for p, q in reversed(shapes):
        state = state // p * q
        best = max(best, state)
    return best


def v1_feasible(shapes) -> bool:
    return math.prod(p for p, _ in shapes) * math.prod(q for _, q in shapes) <= V1_MAX_ELEMENTS


def _inputs(args, device, dtype, requires_grad):
    g = torch.Generator().manual_seed(args.seed)
    P = math.prod(p for p, _ in args.factors)
    Q = math.prod(q for _, q in args.factors)
    x = torch.randn(args.batch_size, P, generator=g, dtype=torch.float64)
    fs = [torch.randn(p, q, generator=g, dtype=torch.float64) / math.sqrt(p) for p, q in args.factors]
    gy = torch.randn(args.batch_size, Q, generator=g, dtype=torch.float64)
    x = x.to(device=device, dtype=dtype).requires_grad_(requires_grad)
    fs = [f.to(device=device, dtype=dtype).requires_grad_(requires_grad) for f in fs]
    return x, fs, gy.to(device=device, dtype=dtype)


def _describe(args, dtype, device, out) -> None:
    shapes = args.factors
    P = math.prod(p for p, _ in shapes)
    Q = math.prod(q for _, q in shapes)
    es = torch.empty(0, dtype=dtype).element_size()
    flops = shuffle_flops(args.batch_size, shapes)
    nbytes = min_bytes(args.batch_size, shapes, dtype)
    fac = " ⊗ ".join(f"{p}x{q}" for p, q in shapes)
    print(f"x: {args.batch_size} x {P}  ·  ({fac}) = {P} x {Q}  ->  y: {args.batch_size} x {Q}   "
          f"[{str(dtype).replace('torch.', '')}, {device}]", file=out)
    state = args.batch_size * largest_state(shapes)
    print(f"state size: {state:,} elements ({state * es / 2**20:.2f} MiB) at most between factors; "
          f"Kronecker matrix (v1): {P * Q:,} elements ({P * Q * es / 2**20:.2f} MiB)", file=out)
    print(f"FLOPs (forward, factor at a time): {flops / 1e9:.4g} GFLOP;  minimal bytes: "
          f"{nbytes / 2**20:.2f} MiB;  arithmetic intensity: {flops / nbytes:.2f} FLOP/byte", file=out)


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------
def cmd_check(args, device, dtype, out) -> int:
    from .testing import rel_error, tolerance

    x, fs, gy = _inputs(args, device, dtype, True)
    impls = [k for k in IMPLS if k != "v1" or v1_feasible(args.factors)]
    if "v1" not in impls:
        print("v1 skipped: the Kronecker matrix would have more than 2^28 elements", file=out)
    results = {}
    for name in impls:
        y = IMPLS[name](x, fs)
        grads = torch.autograd.grad(y, [x, *fs], gy)
        results[name] = [y.detach(), *grads]
        norms = ", ".join(f"{n}={t.double().norm().item():.6g}" for n, t in
                          zip(["y", "dx"] + [f"dF{i + 1}" for i in range(len(fs))], results[name]))
        print(f"{name}: {norms}", file=out)
    # A float64 v2 run tells how far each dtype result may sit from exact; pairs agree when both
    # are within the dtype's tolerance of each other.
    tol = tolerance(dtype, device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32)
    ok = True
    names = ["y", "dx"] + [f"dF{i + 1}" for i in range(len(fs))]
    for i, a in enumerate(impls):
        for b in impls[i + 1:]:
            errs = [rel_error(ta, tb.double()) for ta, tb in zip(results[a], results[b])]
            worst = max(range(len(errs)), key=lambda k: errs[k])
            good = all(e <= (tol if k == 0 else 4 * tol) for k, e in enumerate(errs))
            ok &= good
            print(f"{a} vs {b}: forward rel. diff {errs[0]:.2e}, backward max {max(errs[1:]):.2e} "
                  f"({names[worst]})  {'agree' if good else 'DISAGREE'}", file=out)
    print("all implementations agree" if ok else "DISAGREEMENT", file=out)
    return 0 if ok else 1


def cmd_profile(args, device, dtype, out) -> int:
    from torch.profiler import ProfilerActivity, profile

    name = args.implementation
    if name == "v1" and not v1_feasible(args.factors):
        print("v1 cannot run here: the Kronecker matrix would have more than 2^28 elements", file=out)
        return 2
    fn = IMPLS[name]
    path = args.trace or f"kron-{name}-trace.json"
    try:  # before the run: torch's exporter only logs a failure to open the file
        open(path, "w").close()
    except OSError as e:
        print(f"sparsekern kron: error: cannot write the Chrome trace {path!r}: {e.strerror}", file=sys.stderr)
        return 2
    x, fs, gy = _inputs(args, device, dtype, True)

    def step():
        y = fn(x, fs)
        torch.autograd.grad(y, [x, *fs], gy)

    for _ in range(3):  # warm-up: handles, allocator, lazy init
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, record_shapes=True) as prof:
        for _ in range(args.iters):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=15), file=out)
    prof.export_chrome_trace(path)
    if not os.path.getsize(path):
        print(f"sparsekern kron: error: the Chrome trace {path!r} was not written", file=sys.stderr)
        return 1
    print(f"{name}: {args.iters} forward+backward iterations profiled; Chrome trace: {path}", file=out)
    return 0


def cmd_bench(args, device, dtype, out) -> int:
    import torch.utils.benchmark as benchmark

    x, fs, gy = _inputs(args, device, dtype, True)
    flops = shuffle_flops(args.batch_size, args.factors)
    label = f"kron {args.batch_size} x [{' '.join(f'{p}x{q}' for p, q in args.factors)}]"
    results, summary = [], []
    for name, fn in IMPLS.items():
        if name == "v1" and not v1_feasible(args.factors):
            print("v1 skipped: the Kronecker matrix would have more than 2^28 elements", file=out)
            continue
        env = {"fn": fn, "x": x, "fs": fs, "gy": gy, "torch": torch}
        fwd = benchmark.Timer("with torch.no_grad(): fn(x, fs)", globals=env, label=label,
                              sub_label="forward", description=name).blocked_autorange(min_run_time=0.5)
        bwd = benchmark.Timer("torch.autograd.grad(fn(x, fs), [x, *fs], gy)", globals=env, label=label,
                              sub_label="forward+backward", description=name).blocked_autorange(min_run_time=0.5)
        results += [fwd, bwd]
        t_f, t_b = fwd.median, bwd.median
        summary.append((name, t_f * 1e6, flops / t_f / 1e12, t_b * 1e6, 3 * flops / t_b / 1e12))
    compare = benchmark.Compare(results)
    compare.trim_significant_figures()
    print(str(compare), file=out)
    print("achieved (useful factor-at-a-time FLOPs; forward+backward counts 3x the forward):", file=out)
    print(f"{'impl':6} {'fwd µs':>10} {'fwd TFLOP/s':>12} {'fwd+bwd µs':>12} {'fwd+bwd TFLOP/s':>16}", file=out)
    for name, tf, ff, tb, fb in summary:
        print(f"{name:6} {tf:10.1f} {ff:12.3f} {tb:12.1f} {fb:16.3f}", file=out)
    return 0


def main(args, out=None) -> int:
    out = sys.stdout if out is None else out  # read per call: pytest and others swap sys.stdout
    from .cli import _device

    device = _device(args.device)
    dtype = DTYPES[args.dtype]
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = bool(args.tf32)
    try:
        _describe(args, dtype, device, out)
        return {"check": cmd_check, "profile": cmd_profile, "bench": cmd_bench}[args.command](
            args, device, dtype, out)
    except (MemoryError, RuntimeError) as e:  # torch.OutOfMemoryError is a RuntimeError
        if not isinstance(e, (MemoryError, torch.OutOfMemoryError)) and \
                "can't allocate memory" not in str(e) and "out of memory" not in str(e):
            raise
        print(f"sparsekern kron: out of memory for {args.batch_size} x {math.prod(p for p, _ in args.factors)} "
              f"inputs on {device}; try a smaller batch or smaller factors", file=sys.stderr)
        return 2
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
