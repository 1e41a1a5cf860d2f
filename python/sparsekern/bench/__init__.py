"""`sparsekern bench`: each op timed against its torch counterpart in the same run.

Family modules in this package expose ``cases(device, quick) -> list[Case]``. Every case is
verified against the torch result before it is timed. Times are medians of CUDA-event-timed
repetitions after warm-up (wall clock on the CPU). Results: a table on stdout and a JSON file with
the device, library versions and the date.
"""
from __future__ import annotations

import dataclasses
import datetime
import importlib
import json
import math
import os
import platform
import statistics
import sys
import time
from typing import Callable, Optional

import torch

FAMILIES = ["dense", "csr", "semi", "inplace", "kron", "bsr"]


@dataclasses.dataclass
class Case:
    family: str
    op: str
    shape: str
    dtype: str
    ours: Callable[[], object]
    anchor: Callable[[], object]
    anchor_name: str = "torch"
    flops: float = 0.0          # useful floating-point operations per call (for TFLOP/s)
    bytes: float = 0.0          # minimal bytes moved per call (for TB/s)
    verify: Optional[Callable[[], float]] = None  # returns rel. error of ours vs reference
    tol: float = float("inf")
    extra: dict = dataclasses.field(default_factory=dict)  # e.g. copy_tbps, extra_mib_ours/_anchor
    host_cost: bool = False     # time per call measured on the host (launch-bound shapes)
    # CUDA: also the device time per call of both sides (graph_time_ms: no host overhead)
    device_time: bool = False
    # For device_time: the callables to capture instead of ours/anchor, and the stream to capture
    # on. Backward rows need both: autograd runs each backward op on the stream of its forward op,
    # so the graph whose backward is captured must have been built on the capture stream (a
    # forward built on the default stream puts the backward there, outside the capture, and the
    # capture is invalidated).
    device_fns: Optional[tuple] = None
    graph_stream: Optional[object] = None
    # How device_time is measured: "graph" (graph_time_ms) or "kernels" (kernel_time_ms: the
    # profiler's kernel durations, for a peer whose calls cannot be captured into a graph).
    device_method: str = "graph"


class Tf32:
    """Wraps callables so each call runs with ``torch.backends.cuda.matmul.allow_tf32 = on``: rows
    with and without TF32 share one run without leaking the setting into each other."""

    def __init__(self, on: bool):
        self.on = on

    def wrap(self, fn: Callable[[], object]) -> Callable[[], object]:
        def call():
            prev = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = self.on
            try:
                return fn()
            finally:
                torch.backends.cuda.matmul.allow_tf32 = prev
        return call

    __call__ = wrap


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_ms(fn: Callable[[], object], device: torch.device, *, warmup_ms: float = 25.0,
            rep_ms: float = 100.0, min_reps: int = 5, max_reps: int = 2000) -> float:
    """Median time of `fn` in milliseconds."""
    fn()
    _sync(device)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(3):
            fn()
        end.record()
        torch.cuda.synchronize(device)
        est = max(start.elapsed_time(end) / 3, 1e-4)
        for _ in range(int(warmup_ms / est)):
            fn()
        reps = int(min(max(rep_ms / est, min_reps), max_reps))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for s, e in zip(starts, ends):
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize(device)
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))
    times = []
    deadline = time.perf_counter() + rep_ms / 1e3
    while len(times) < min_reps or (time.perf_counter() < deadline and len(times) < max_reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def copy_tbps(device: torch.device, nbytes: int) -> float:
    """Device-to-device copy bandwidth in TB/s (bytes read + written per second) of an `nbytes`
    buffer, timed with time_ms: the memory ceiling the families' rooflines and floors use."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return 2 * nbytes / time_ms(lambda: dst.copy_(src), device) / 1e9


def graph_time_ms(fn: Callable[[], object], device: torch.device, calls: int = 20, stream=None) -> float:
    """Device time per call in milliseconds: `calls` calls captured into one CUDA graph, whose
    replays are timed (time_ms); the host's per-call work (Python, argument checks, launches) is
    then off the clock, and what remains is the kernels and the gaps between them. Used next to
    time_ms for ops whose eager time is mostly host time. `stream`: warm up and capture on this
    stream (default: a new one for the warm-up, torch's capture stream for the capture)."""
    side = stream if stream is not None else torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm-up off the default stream, as torch.cuda.graph wants
        for _ in range(3):
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    _sync(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(calls):
            fn()
    return time_ms(graph.replay, device) / calls


def gpu_events(fn: Callable[[], object], device: torch.device, calls: int = 1, warmup: int = 3) -> list:
    """The GPU activities (kernels, copies, memsets) of `calls` calls of fn after `warmup` calls, as
    torch.profiler events (name, time_range)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    _sync(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        _sync(device)
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def kernel_time_ms(fn: Callable[[], object], device: torch.device, calls: int = 20) -> float:
    """Device time per call in milliseconds as the sum of the durations of every kernel, copy and
    memset that `calls` calls put on the GPU (gpu_events), after a warm-up. Unlike graph_time_ms
    it leaves out the gaps between kernels, so compare it only with itself. For callables that
    cannot be captured into a CUDA graph (a peer launching on a stream of its own choosing)."""
    total_us = sum(e.time_range.elapsed_us() for e in gpu_events(fn, device, calls))
    if total_us <= 0:
        raise RuntimeError("the profiler recorded no GPU activity")
    return total_us / calls / 1e3


def host_time_us(fn: Callable[[], object], device: torch.device, calls: int = 500) -> float:
    """Host cost per call in µs: back-to-back calls, no sync inside; for launch-bound ops.

    Batches of `calls` stay well below the launch queue's depth (~1000 kernels), so the host never
    waits for the GPU; the garbage collector is paused while timing (its pauses land on whichever
    op happens to run, and earlier benchmark rows leave it many objects to scan).
    """
    import gc

    for _ in range(200):
        fn()
    _sync(device)
    gc.collect()
    gc.disable()
    try:
        best = float("inf")
        for _ in range(20):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t = (time.perf_counter() - t0) / calls * 1e6
            _sync(device)
            best = min(best, t)
    finally:
        gc.enable()
    return best


def environment(device: torch.device) -> dict:
    from .. import __version__

    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "sparsekern": __version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
        "device": str(device),
    }
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        env["device_name"] = p.name
        env["sm_count"] = p.multi_processor_count
        env["compute_capability"] = f"{p.major}.{p.minor}"
        env["tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
    else:
        env["device_name"] = platform.processor() or platform.machine()
        env["threads"] = torch.get_num_threads()
    return env


def _progress(iterable, total, desc):
    try:
        from tqdm import tqdm

        return tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False)
    except ImportError:
        def gen():
            for i, x in enumerate(iterable):
                print(f"\r{desc} {i + 1}/{total}", end="", file=sys.stderr, flush=True)
                yield x
            print(file=sys.stderr)
        return gen()


def run_cases(cases: list[Case], device: torch.device) -> list[dict]:
    rows = []
    for c in _progress(cases, len(cases), "bench"):
        row = dict(family=c.family, op=c.op, shape=c.shape, dtype=c.dtype, anchor=c.anchor_name, **c.extra)
        try:
            _measure(c, row, device)
        except Exception as e:  # noqa: BLE001 - one failing case (e.g. an optional peer's kernel) must
            # not lose the rest of a long run: the row records the error and counts as unverified.
            row.update(error=f"{type(e).__name__}: {e}", verified=False, ours=float("nan"),
                       anchor_time=float("nan"), ratio=float("nan"))
            row.setdefault("metric", "ms")
        rows.append(row)
        # One line per finished row on stderr, so a run cut short still shows what it measured.
        print(f"[row] {row['family']} | {row['op']} | {row['shape']} | {row['dtype']} | ours {row['ours']:.4g} | "
              f"{row['anchor']} {row['anchor_time']:.4g} | ratio {row['ratio']:.3f}"
              + (f" | ERROR {row['error']}" if "error" in row else ""), file=sys.stderr, flush=True)
    return rows


def _measure(c: Case, row: dict, device: torch.device) -> None:
    """Verifies and times one case into `row`."""
    if c.verify is not None:
        err = c.verify()
        row["rel_err"] = err
        row["verified"] = bool(err <= c.tol)
    if c.host_cost:
        t_ours, t_anchor = host_time_us(c.ours, device), host_time_us(c.anchor, device)
        row.update(metric="host_us_per_call", ours=t_ours, anchor_time=t_anchor, ratio=t_ours / t_anchor)
    else:
        # Interleave the two timings twice so clock/thermal drift hits both alike.
        t1o, t1a = time_ms(c.ours, device), time_ms(c.anchor, device)
        t2o, t2a = time_ms(c.ours, device), time_ms(c.anchor, device)
        t_ours, t_anchor = min(t1o, t2o), min(t1a, t2a)
        row.update(metric="ms", ours=t_ours, anchor_time=t_anchor, ratio=t_ours / t_anchor)
        if c.device_time and device.type == "cuda":
            try:
                f_ours, f_anchor = c.device_fns or (c.ours, c.anchor)
                if c.device_method == "kernels":
                    d_ours, d_anchor = kernel_time_ms(f_ours, device), kernel_time_ms(f_anchor, device)
                else:
                    d_ours = graph_time_ms(f_ours, device, stream=c.graph_stream)
                    d_anchor = graph_time_ms(f_anchor, device, stream=c.graph_stream)
                row.update(device_ms_ours=d_ours, device_ms_anchor=d_anchor, device_ratio=d_ours / d_anchor,
                           device_method=c.device_method)
            except Exception as e:  # noqa: BLE001 - a capture failure loses this column, not the row
                row["device_ms_error"] = f"{type(e).__name__}: {e}"
        if c.flops:
            row["tflops_ours"] = c.flops / t_ours / 1e9
            row["tflops_anchor"] = c.flops / t_anchor / 1e9
        if c.bytes:
            row["tbps_ours"] = c.bytes / t_ours / 1e9
            row["tbps_anchor"] = c.bytes / t_anchor / 1e9
            if row.get("copy_tbps"):  # a ceiling measured in the same run (memory-bound families)
                row["frac_of_copy"] = row["tbps_ours"] / row["copy_tbps"]


def check_writable(path: str, option: str) -> None:
    """Raises ValueError naming `option` unless a file can be written at `path` (tried by opening it
    for appending, which creates nothing new past an empty file and changes no existing content)."""
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        raise ValueError(f"{option} {path!r} cannot be written: {e.strerror or e}") from None
    if not existed:
        os.remove(path)


def _json_safe(x):
    """NaN and infinities as null (strict JSON has no NaN; a failed row's times are NaN)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def summary_main(prog: str, description: str, summarize) -> int:
    """`python -m sparsekern.bench.<family> BENCH.json`: a family's target summary of a bench JSON
    (`sparsekern bench --full --json ...`); a one-line message and exit 2 for a bad argument."""
    import argparse

    p = argparse.ArgumentParser(prog=f"python -m {prog}", description=description)
    p.add_argument("json", help="a JSON file written by `sparsekern bench --full --json FILE`")
    args = p.parse_args()
    try:
        with open(args.json) as fh:
            rows = json.load(fh)["rows"]
    except OSError as e:
        p.error(f"cannot read {args.json!r}: {e.strerror or e}")
    except (ValueError, KeyError, TypeError):
        p.error(f"{args.json!r} is not a bench JSON (no 'rows' list)")
    summarize(rows)
    return 0


def print_table(rows, out=None) -> None:
    out = sys.stdout if out is None else out  # read per call: pytest and others swap sys.stdout
    hdr = ["family", "op", "shape", "dtype", "ours", "anchor", "ratio", "TFLOP/s | TB/s (of copy)",
           "extra MiB ours/anchor", "ok"]
    cells = []
    for r in rows:
        unit = "us" if r.get("metric") == "host_us_per_call" else "ms"
        if "tflops_ours" in r:
            rate = f"{r['tflops_ours']:.3g}"
        elif "tbps_ours" in r:
            rate = f"{r['tbps_ours']:.3g} TB/s" + (f" ({r['frac_of_copy']:.0%})" if "frac_of_copy" in r else "")
        else:
            rate = "-"
        mem = (f"{r['extra_mib_ours']:.4g}/{r['extra_mib_anchor']:.4g}" if r.get("extra_mib_ours") is not None
               else "-")
        cells.append([r["family"], r["op"], r["shape"], r["dtype"], f"{r['ours']:.4g}{unit}",
                      f"{r['anchor_time']:.4g}{unit} ({r['anchor']})", f"{r['ratio']:.3f}", rate, mem,
                      {True: "ok", False: "WRONG"}.get(r.get("verified"), "-")])
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(hdr)]
    print("  ".join(h.ljust(w) for h, w in zip(hdr, widths)), file=out)
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths)), file=out)


def run(device: torch.device, families=None, quick: bool = True, json_path: Optional[str] = None,
        out=None) -> dict:
    out = sys.stdout if out is None else out  # read per call: pytest and others swap sys.stdout
    cases: list[Case] = []
    for fam in families or FAMILIES:
        cases += importlib.import_module(f"{__name__}.{fam}").cases(device, quick)
    if json_path:  # before the run: an unwritable path found after it lost the results
        check_writable(json_path, "--json")
    result = {"environment": environment(device), "quick": quick, "rows": run_cases(cases, device)}
    if json_path:
        with open(json_path, "w") as f:
            json.dump(_json_safe(result), f, indent=1)
    print_table(result["rows"], out)
    if json_path:
        print(f"wrote {json_path}", file=out)
    return result
