"""Timing shared by the diagnostics in this folder (they run as scripts, so this folder is on
sys.path). `sparsekern.bench.time_ms` brackets each call with CUDA events (host time shows when it
exceeds the GPU time); burst_ms times calls back to back (the GPU time when the host keeps ahead);
host_us_per_call times the host side of a call (no synchronisation inside the loop)."""
from __future__ import annotations

import time

import torch


def burst_ms(fn, calls: int = 20, reps: int = 9, warmup: int = 3) -> float:
    """Median over `reps` of the mean time per call of `calls` back-to-back calls, in ms (CUDA)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / calls)
    return sorted(ts)[reps // 2]


def host_us_per_call(fn, sync, calls: int = 1000, repeats: int = 5, warmup: int = 50) -> float:
    """Best over `repeats` loops of `calls` calls of the µs per call, the loop unsynchronised (on
    CUDA: the host side only, while the GPU keeps up); `sync` waits for the device between loops."""
    for _ in range(warmup):
        fn()
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        sync()
        best = min(best, (t1 - t0) / calls * 1e6)
    return best
