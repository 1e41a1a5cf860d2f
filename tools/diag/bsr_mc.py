"""Kernel µs of the 16-bit dds with blocks of 128 per sm_90a kernel choice: the one-column kernel,
the grouped kernel and the cluster (multicast) kernel, forward (Bop = Wᵀ, BlockSparseLinear's
forward) and input gradient (Bop = W), each checked against float64.

    python bsr_mc.py [NAME ...]  runs this file once per kernel choice (all, or those named; the
                                 switches are read once per process) and prints a table
    python bsr_mc.py child NAME  one choice, the environment already set (one line per case)
BSR_MC_DTYPES=bf16 (or fp16, or both: bf16,fp16, the default) picks the dtypes.
"""
import os
import subprocess
import sys

import torch

import sparsekern

CHOICES = {
    "one-column": {"SPARSEKERN_BSR_GROUPED": "0", "SPARSEKERN_BSR_MULTICAST": "0"},
    "grouped": {"SPARSEKERN_BSR_GROUPED": "1", "SPARSEKERN_BSR_MULTICAST": "0"},
    "auto": {},
    "multicast": {"SPARSEKERN_BSR_MULTICAST": "1"},
    "multicast-static": {"SPARSEKERN_BSR_MULTICAST": "1", "SPARSEKERN_BSR_SCHEDULE": "static"},
    "one-column-static": {"SPARSEKERN_BSR_GROUPED": "0", "SPARSEKERN_BSR_MULTICAST": "0",
                          "SPARSEKERN_BSR_SCHEDULE": "static"},
}
SHAPES = [(8192, 4096, 4096), (8192, 768, 3072), (8192, 3072, 768), (1000, 4096, 4096)]
if os.environ.get("BSR_MC_SHAPES"):  # e.g. 8192x4096x4096,1000x4096x4096
    SHAPES = [tuple(int(v) for v in s.split("x")) for s in os.environ["BSR_MC_SHAPES"].split(",")]
DENSITIES = [0.05, 0.1, 0.25, 0.5]


def child(name):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from kernel_time import kernel_us
    dev = torch.device("cuda")
    names = os.environ.get("BSR_MC_DTYPES", "bf16,fp16").split(",")
    for dt in [{"bf16": torch.bfloat16, "fp16": torch.float16}[n] for n in names]:
        for (m, k, n) in SHAPES:
            for d in DENSITIES:
                g = torch.Generator(device="cpu").manual_seed(1234)
                w = sparsekern.BlockSparseMatrix.random((n, k), 128, d, dtype=dt, device=dev, generator=g)
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
                    ey = ((y.double() - ry).norm() / ry.norm()).item()
                    edx = ((dx.double() - rdx).norm() / rdx.norm()).item()
                    tf = kernel_us(lambda: sparsekern.bsr.dds(x, wt, bias), reps=20)
                    tb = kernel_us(lambda: sparsekern.bsr.dds(dy, w), reps=20)
                print(f"{name} {str(dt)[6:]} {m}x{k}->{n} d={d} fwd {tf:.1f} err {ey:.1e} dx {tb:.1f} err {edx:.1e}",
                      flush=True)


def main(names):
    rows = {}
    choices = {n: CHOICES[n] for n in (names or CHOICES)}
    for name, env in choices.items():
        e = dict(os.environ, **env)
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "child", name], env=e,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            print(f"{name}: exit {r.returncode}\n{r.stderr[-3000:]}")
        for line in r.stdout.splitlines():
            print(line, flush=True)
            f = line.split()
            key = (f[1], f[2], f[3])
            rows.setdefault(key, {})[name] = (float(f[5]), float(f[7]), float(f[9]), float(f[11]))
    print("\nkernel µs, forward / input gradient (worst relative error vs float64)")
    print(f"{'dtype':5s} {'shape':16s} {'d':6s} " + " ".join(f"{n:>15s}" for n in choices))
    for key, v in rows.items():
        cells = []
        for n in choices:
            if n in v:
                tf, ef, tb, eb = v[n]
                cells.append(f"{tf:7.1f}/{tb:7.1f}")
            else:
                cells.append(f"{'-':>15s}")
        err = max(max(x[1], x[3]) for x in v.values())
        print(f"{key[0]:5s} {key[1]:16s} {key[2]:6s} " + " ".join(cells) + f"  err {err:.1e}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "child":
        child(sys.argv[2])
    else:
        main(sys.argv[1:])
