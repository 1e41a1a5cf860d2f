"""Issue 5: GPU time of the fused fp32 forward kernels, old against new (SPARSEKERN_KRON_FWD).

For the ten cases of the issue's table (sparsekern.bench.kron.FULL, factors scaled by 1/sqrt(p),
TF32 off): the device time of one forward's kernels (torch.profiler, the median over back-to-back
calls of the per-call sum) under `old` and `new`, the same with L2 flushed before every call
("cold": the 1024-row inputs and outputs, 16 MB each, otherwise stay in the H200's L2 between
calls), v2 (kron_reference, torch per factor) the same way, the roofline max(FLOPs / 50.9 TFLOP/s,
min bytes / 4.27 TB/s) and the new kernel's share of it, and the error of each result against
float64. Then, for the fused cases with batch >= 1024, the register-tile plan's overrides
(`new:threads=128`, `new:tile=4`, rows, stages) so that one run tells which plan to make default.

Kernel times only: the bench's event-timed medians also hold the host's ~20 µs per call
(tools/diag/kron_host.py).

Usage: python tools/diag/kron_fwd_ab.py [--quick] [--dry-run]
  --quick: fewer calls, no sweep; --dry-run: on the CPU with batch / 64 (checks the script only:
  no device times)
"""
from __future__ import annotations

import math
import statistics
import sys
import time

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from sparsekern import _C, kron_matmul
from sparsekern._core import as_dlpack
from sparsekern.bench.kron import FULL
from sparsekern.kron import kron_reference
from sparsekern.kron_cli import min_bytes, shuffle_flops

PEAK_FLOPS = 50.9e12  # H200 fp32 (TF32 off) SGEMM rate the issue's roofline uses
COPY_BW = 4.27e12     # H200 copy bandwidth, bytes/s
QUICK = "--quick" in sys.argv
DRY = "--dry-run" in sys.argv
CALLS = 3 if DRY else 10 if QUICK else 20
# Plan overrides timed per case (the planner's default is timed above as "new"): one 256-thread or
# two 128-thread blocks per SM, 4x4 tiles, fewer rows per tile (more tiles in the pipeline), one X
# buffer.
SWEEP = ["new:threads=256", "new:threads=128", "new:tile=4", "new:threads=256,rows=2", "new:stages=1",
         "new:threads=128,stages=1"]
SWEEP_32 = ["new:tile=8", "new:tile=8,rows=8", "new:threads=128", "new:threads=128,rows=4", "new:tile=4,rows=2"]

dev = torch.device("cpu" if DRY else "cuda")
flush_buf = None


def flush():
    global flush_buf
    if flush_buf is None:
        flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device=dev)  # 256 MB > the H200's L2
    flush_buf.zero_()


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


def gpu_us(fn, cold=False):
    """Median over CALLS calls of the summed device time of one call's kernels, µs (the dry run: the
    median wall time of a call)."""
    if DRY:
        ts = []
        for _ in range(CALLS):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(ts), []
    for _ in range(3):
        fn()
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            if cold:
                flush()
            fn()
        sync()
    ks = sorted((e for e in prof.events()
                 if e.device_type == DeviceType.CUDA and "FillFunctor" not in e.name),
                key=lambda e: e.time_range.start)
    if not ks:
        return float("nan"), []
    names = sorted({e.name[:60] for e in ks})
    if len(ks) % CALLS:
        return sum(e.time_range.elapsed_us() for e in ks) / CALLS, names
    k = len(ks) // CALLS
    per_call = [sum(e.time_range.elapsed_us() for e in ks[i * k:(i + 1) * k]) for i in range(CALLS)]
    return statistics.median(per_call), names


def rel_err(y, ref):
    return ((y.double() - ref).norm() / ref.norm()).item()


def plan_of(x, fs):
    p = _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], False)
    return p.replace("\n", "; ")


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    name = "CPU dry run" if DRY else torch.cuda.get_device_name()
    print(f"{name}: forward kernel time per call, µs (median of {CALLS}); "
          f"roofline at {PEAK_FLOPS / 1e12:.1f} TFLOP/s, {COPY_BW / 1e12:.2f} TB/s")
    g = torch.Generator().manual_seed(0)
    rows = []
    data = {}
    head = (f"{'case':19s} {'old':>7s} {'new':>7s} {'old/new':>7s} {'roof':>6s} {'%roof':>5s} {'v2':>7s} "
            f"{'v2/new':>6s} | cold: {'old':>7s} {'new':>7s} {'v2':>7s} | err old/new")
    print(head)
    for full_batch, sizes in FULL:
        batch = max(1, full_batch // 64) if DRY else full_batch
        shapes = [(s, s) for s in sizes]
        P = math.prod(sizes)
        x = torch.randn(batch, P, generator=g).to(dev)
        fs = [(torch.randn(s, s, generator=g) / math.sqrt(s)).to(dev) for s in sizes]
        ref = kron_reference(x.double(), [f.double() for f in fs])
        roof = max(shuffle_flops(batch, shapes) / PEAK_FLOPS, min_bytes(batch, shapes, torch.float32) / COPY_BW) * 1e6
        case = f"{batch}x{sizes}".replace(" ", "")
        res = {}
        for sel in ("old", "new"):
            _C.kron_set_forward_kernel(sel)
            y = kron_matmul(x, fs)
            res[sel] = (gpu_us(lambda: kron_matmul(x, fs))[0], gpu_us(lambda: kron_matmul(x, fs), cold=True)[0],
                        rel_err(y, ref), plan_of(x, fs))
        _C.kron_set_forward_kernel("")
        v2 = gpu_us(lambda: kron_reference(x, fs))[0]
        v2c = gpu_us(lambda: kron_reference(x, fs), cold=True)[0]
        o, n = res["old"], res["new"]
        print(f"{case:19s} {o[0]:7.1f} {n[0]:7.1f} {o[0] / n[0]:7.2f} {roof:6.1f} {100 * roof / n[0]:5.0f} "
              f"{v2:7.1f} {v2 / n[0]:6.2f} | cold: {o[1]:7.1f} {n[1]:7.1f} {v2c:7.1f} | {o[2]:.1e}/{n[2]:.1e}")
        print(f"    new plan: {n[3]}")
        rows.append((batch, sizes, o[0], n[0], v2, roof))
        data[(full_batch, tuple(sizes))] = (x, fs, ref)
        sys.stdout.flush()
    gm = lambda v: math.exp(sum(map(math.log, v)) / len(v))  # noqa: E731
    print(f"kernel-time geomean v2/new {gm([r[4] / r[3] for r in rows]):.2f}x, v2/old {gm([r[4] / r[2] for r in rows]):.2f}x;"
          f" % roofline (new) for batch >= 1024: "
          + ", ".join(f"{b}x{s}: {100 * r / n:.0f}" for b, s, _, n, _, r in rows if b >= 1024))
    if QUICK:
        return
    print("\nregister-tile plan overrides (warm µs per call; err vs float64; plan)")
    for (batch, sizes), (x, fs, ref) in data.items():
        if batch < 1024 or max(sizes) > 64:
            continue
        line = f"{x.shape[0]}x{list(sizes)}".replace(" ", "")
        print(line)
        for sel in SWEEP_32 if max(sizes) == 32 else SWEEP:
            _C.kron_set_forward_kernel(sel)
            try:
                y = kron_matmul(x, fs)
                t = gpu_us(lambda: kron_matmul(x, fs))[0]
                plan = plan_of(x, fs)
                plan = plan[plan.find("regs="):plan.find(" smem=")] if "regs=" in plan else plan
                print(f"    {sel:28s} {t:7.1f}  err {rel_err(y, ref):.1e}  {plan}")
            except Exception as e:  # a failing variant must not hide the others
                print(f"    {sel:28s} FAILED {type(e).__name__}: {e}")
            finally:
                _C.kron_set_forward_kernel("")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
