"""Kernel µs of the 16-bit sm_90a dds per kernel and epilogue: the grouped kernel storing through
shared memory + TMA (the default), the grouped kernel storing from registers
(SPARSEKERN_BSR_TMA_STORE=0) and the one-column kernel, forward (Bop = Wᵀ + bias,
BlockSparseLinear's forward) and input gradient (Bop = W), 8192 rows, each checked against float64.

    python bsr_epilogue.py [NAME ...]   one child process per choice (the switches are read once per
                                        process), then a table
BSR_EPI_SHAPES=8192x4096x4096,... (m x k x n), BSR_EPI_BLOCKS=64,128, BSR_EPI_DTYPES=bf16,fp16 and
BSR_EPI_DENSITIES=0.05,0.1 narrow the grid."""
import os
import subprocess
import sys

import torch

CHOICES = {
    "grouped-tma": {"SPARSEKERN_BSR_GROUPED": "1"},
    "grouped-regs": {"SPARSEKERN_BSR_GROUPED": "1", "SPARSEKERN_BSR_TMA_STORE": "0"},
    "one-column": {"SPARSEKERN_BSR_GROUPED": "0"},
}


def _list(name, default, conv):
    return [conv(v) for v in os.environ.get(name, default).split(",")]


def child(name):
    import sparsekern
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from kernel_time import kernel_us
    dev = torch.device("cuda")
    shapes = _list("BSR_EPI_SHAPES", "8192x4096x4096", lambda s: tuple(int(v) for v in s.split("x")))
    for dn in _list("BSR_EPI_DTYPES", "bf16", str):
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dn]
        for (m, k, n) in shapes:
            for b in _list("BSR_EPI_BLOCKS", "64,128", int):
                for d in _list("BSR_EPI_DENSITIES", "0.05,0.1,0.15,0.25,0.5", float):
                    g = torch.Generator().manual_seed(1234)
                    w = sparsekern.BlockSparseMatrix.random((n, k), b, d, dtype=dt, device=dev, generator=g)
                    x = torch.randn(m, k, device=dev, dtype=dt)
                    dy = torch.randn(m, n, device=dev, dtype=dt)
                    bias = torch.randn(n, device=dev, dtype=dt)
                    wt = w.t()
                    with torch.no_grad():
                        y = sparsekern.bsr.dds(x, wt, bias)
                        dx = sparsekern.bsr.dds(dy, w)
                        wd = w.to_dense().double()
                        ry = x.double() @ wd.t() + bias.double()
                        rdx = dy.double() @ wd
                        err = max(((y.double() - ry).norm() / ry.norm()).item(),
                                  ((dx.double() - rdx).norm() / rdx.norm()).item())
                        tf = kernel_us(lambda: sparsekern.bsr.dds(x, wt, bias), reps=20)
                        tb = kernel_us(lambda: sparsekern.bsr.dds(dy, w), reps=20)
                    print(f"{name} {dn} {m}x{k}->{n} b={b} d={d} {tf:.1f} {tb:.1f} {err:.1e}", flush=True)


def main(names):
    choices = {n: CHOICES[n] for n in (names or CHOICES)}
    rows = {}
    for name, env in choices.items():
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "child", name],
                           env=dict(os.environ, **env), capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            print(f"{name}: exit {r.returncode}\n{r.stderr[-2000:]}", flush=True)
        for line in r.stdout.splitlines():
            f = line.split()
            rows.setdefault(tuple(f[1:5]), {})[name] = (float(f[5]), float(f[6]), float(f[7]))
    print("kernel µs, forward / input gradient; worst relative error vs float64 over the choices")
    print(f"{'case':34s} " + " ".join(f"{n:>15s}" for n in choices))
    for key, v in rows.items():
        cells = [f"{v[n][0]:7.1f}/{v[n][1]:7.1f}" if n in v else f"{'-':>15s}" for n in choices]
        print(f"{' '.join(key):34s} " + " ".join(cells) + f"  err {max(x[2] for x in v.values()):.1e}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "child":
        child(sys.argv[2])
    else:
        main(sys.argv[1:])
