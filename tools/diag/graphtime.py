"""Device time of a CUDA call for the diagnostics of this folder: `n` calls captured in one CUDA
graph, replayed five times, the median replay's time per call in µs (no host time in it). `stream`:
warm up and capture on it (a backward must be captured on the stream its forward ran on), else
on a new one."""
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
    ts = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / n)
    return sorted(ts)[2]
