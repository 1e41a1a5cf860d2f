"""Device time of a CUDA call for the diagnostics of this folder: `n` calls captured in one CUDA
graph, replayed five times, the median replay's time per call in µs (no host time in it). `stream`:
warm up and capture on it (a backward must be captured on the stream its forward ran on), else
on a new one. Also: `forward_for_capture` (a layer's forward on a stream of its own, for a
backward to capture there) and `kernel_times` (per-kernel device µs of a call by the torch
profiler)."""
import torch


def graph_time(fn, n=50, stream=None):
    s = stream if stream is not None else torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for _ in range(n):
                fn()
    torch.cuda.current_stream().wait_stream(s)
    return replay_time(g, n)


def replay_time(graph, n, replays=5):
    """µs per call of a captured graph of `n` calls: the median of `replays` timed replays."""
    ts = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / n)
    return sorted(ts)[replays // 2]


def forward_for_capture(layer, x):
    """(stream, x with grad, y): layer(x) run on a new stream, so that graph_time(..., stream=that
    stream) can capture the backward of y (autograd runs it on its forward's stream)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        xg = x.clone().requires_grad_()
        y = layer(xg)
    torch.cuda.current_stream().wait_stream(s)
    return s, xg, y


def kernel_times(fn, reps=10, width=48):
    """{kernel name (first `width` characters): device µs per call of fn} by the torch profiler,
    over `reps` calls after one warm-up call."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            out.setdefault(e.name[:width], []).append(e.device_time_total)
    return {k: sum(v) / reps for k, v in out.items()}


def layer_from_spec(spec, m=8192, seed=0):
    """(layer, x, go) for a layer spec "dtype:in:out:block:density" (dtype bf16 | fp16 | tf32; TF32
    allowed for tf32 only): a CUDA BlockSparseLinear with bias, an input of m rows and an output
    gradient, all from one seeded generator."""
    import sparsekern
    name, k_in, n_out, b, d = spec.split(":")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[name]
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    g = torch.Generator().manual_seed(seed)
    layer = sparsekern.BlockSparseLinear(int(k_in), int(n_out), density=float(d), block_size=int(b),
                                         device="cuda", dtype=dtype, generator=g)
    x = torch.randn(m, int(k_in), generator=g).to("cuda", dtype)
    go = torch.randn(m, int(n_out), generator=g).to("cuda", dtype)
    return layer, x, go
