"""Reference comparisons shared by the tests, `sparsekern check` and the benchmarks.

One tolerance table for every op: errors are ‖out − ref‖_F / ‖ref‖_F against a float64 reference.
run_python runs a test's probe in a fresh process.
"""
from __future__ import annotations

import os
import subprocess
import sys

import torch

# Relative Frobenius error allowed per dtype. fp32 with TF32 allowed is looser (10-bit mantissa);
# the half types see one rounding of each input and of the output.
TOLERANCE = {
    torch.float64: 1e-10,
    torch.float32: 1e-5,
    "tf32": 5e-3,
    torch.float16: 5e-3,
    torch.bfloat16: 3e-2,
}


def tolerance(dtype: torch.dtype, tf32: bool = False) -> float:
    if dtype == torch.float32 and tf32:
        return TOLERANCE["tf32"]
    return TOLERANCE[dtype]


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖_F / ‖ref‖_F in float64 (inf if `out` has NaN/inf where `ref` is finite)."""
    out64 = out.detach().to("cpu", torch.float64)
    ref64 = ref.detach().to("cpu", torch.float64)
    if out64.shape != ref64.shape:
        raise AssertionError(f"shape {tuple(out64.shape)} != reference shape {tuple(ref64.shape)}")
    if not torch.isfinite(out64).all():
        return float("inf")
    denom = ref64.norm().item()
    diff = (out64 - ref64).norm().item()
    return diff / denom if denom > 0 else diff


def randn(*shape, dtype=torch.float32, device="cpu", generator=None) -> torch.Tensor:
    """Standard-normal data drawn in float64 on the CPU, then cast: same values on every device."""
    return torch.randn(*shape, dtype=torch.float64, generator=generator).to(dtype=dtype, device=device)


def run_python(code: str, timeout: float = 120, **env) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh Python process (for what a process decides once: environment
    switches read at first use, loaded libraries, exit-time behaviour), with this process's
    sys.path as PYTHONPATH and the given environment variables set; stdout and stderr captured."""
    full = dict(os.environ, **env)
    full["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=timeout)


_capture_streams: dict = {}  # capture_graph's capture stream per device


def capture_graph(fn, warmups: int = 2):
    """(graph, outputs): `fn` warmed up `warmups` times on a side stream (as torch.cuda.graph wants),
    then captured into a torch.cuda.CUDAGraph whose replays rewrite `outputs`. Also checks that the
    capture left the per-stream caches alone (a cache keeping a buffer from the graph's pool is what
    torch.compile's mode="reduce-overhead" refuses; see sparsekern._core)."""
    from . import _core

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    cached = (dict(_core._workspaces), dict(_core._tile_counters))
    graph = torch.cuda.CUDAGraph()
    # The capture stream of the current device: torch.cuda.graph's own default is one stream per
    # process, made on the device of the first capture, so a later capture on another GPU would run
    # its kernels there and allocate on this device's legacy stream (a capture error).
    device = torch.cuda.current_device()
    stream = _capture_streams.get(device)
    if stream is None:
        stream = _capture_streams[device] = torch.cuda.Stream(device)
    with torch.cuda.graph(graph, stream=stream):
        outputs = fn()
    assert (_core._workspaces, _core._tile_counters) == cached, "a per-stream cache kept a buffer of the graph's pool"
    return graph, outputs
