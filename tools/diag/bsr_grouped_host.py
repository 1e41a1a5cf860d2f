"""Per-call time of BlockSparseLinear's forward at the BERT-base shapes (8192 rows, bf16, blocks of
128) with the grouped or the one-column sm_90a dds (SPARSEKERN_BSR_GROUPED=1 / 0, one child process
each): the host time of a call (a loop of calls without synchronisation, best of 5 repeats: the
loop runs at the slower of host and GPU), the GPU time per call (CUDA events around a loop), and
the kernel time (torch profiler).

    python bsr_grouped_host.py          both choices, a line per case
"""
import os
import subprocess
import sys
import time

import torch

CASES = [(768, 3072, 0.1), (768, 3072, 0.5), (3072, 768, 0.1), (4096, 4096, 0.1)]


def child(name):
    import sparsekern
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from kernel_time import kernel_us
    dev = torch.device("cuda")
    for (k, n, d) in CASES:
        layer = sparsekern.BlockSparseLinear(k, n, density=d, block_size=128, device=dev, dtype=torch.bfloat16)
        x = torch.randn(8192, k, device=dev, dtype=torch.bfloat16)
        with torch.no_grad():
            for _ in range(10):
                layer(x)
            torch.cuda.synchronize()
            best = float("inf")
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(50):
                    layer(x)
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                best = min(best, (t1 - t0) / 50 * 1e6)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(200):
                layer(x)
            e1.record()
            torch.cuda.synchronize()
            gpu = e0.elapsed_time(e1) / 200 * 1e3
            kern = kernel_us(lambda: layer(x), reps=20)
        print(f"{name} 8192x{k}->{n} d={d}: host loop {best:6.1f} us/call, events {gpu:6.1f} us/call, kernels {kern:6.1f} us",
              flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "child":
        child(sys.argv[2])
    else:
        for name, g in (("one-column", "0"), ("grouped", "1")):
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "child", name],
                               env=dict(os.environ, SPARSEKERN_BSR_GROUPED=g), capture_output=True, text=True, timeout=300)
            print(r.stdout, end="", flush=True)
            if r.returncode != 0:
                print(r.stderr[-2000:])
