"""Issue 3: the load balance of the persistent sm_90a dds kernels' tile schedules, simulated (no GPU).

For random block patterns (sparsekern.bsr.random_mask: a fixed number of blocks at random
positions, so block columns hold unequal numbers of blocks) of a K = N = 4096 weight, M = 8192 rows:
the makespan (the busiest worker's blocks, plus a fixed cost per tile in block-equivalents) over the
balanced one, for
  static     CTA c takes tiles c, c + #CTAs, ... (the rotated order of tile_coords);
  dynamic    each tile to the worker that frees first, in the rotated order;
  heavy      the same, each row panel's columns heaviest first (the kernels' kHeavyFirst);
  heavy-chunk  the same over chunks of as many row panels as one wave of tiles spans (⌈workers /
             columns⌉): a chunk's tiles by column rank, then panel (not in the kernels: no
             better than heavy at b = 128 in this model);
for the grouped kernel (256-row tiles, one worker per CTA) and the one-column ping-pong kernel
(128-row tiles, two workers per CTA, ring r taking every other tile of the CTA when static).

Usage: python tools/diag/bsr_schedule_sim.py [--block B] [--sms N] [--fixed F]
"""
from __future__ import annotations

import argparse
import heapq

import torch

from sparsekern.bsr import random_mask


def tiles(nnz_per_col, panels, order, chunk=1):
    """Tile weights in hand-out order: rotated (tile_coords), or heavy: row panels in chunks of
    `chunk`, each chunk's tiles by column rank (heaviest first), then panel."""
    n = len(nnz_per_col)
    heavy = sorted(range(n), key=lambda j: (-nnz_per_col[j], j))
    for t in range(panels * n):
        if order == "heavy":
            c0 = (t // (chunk * n)) * chunk
            rows = min(chunk, panels - c0)
            r, _ = divmod(t - c0 * n, rows)
            yield nnz_per_col[heavy[r]]
        else:
            mt, r = divmod(t, n)
            yield nnz_per_col[(r + mt) % n]


def makespan(weights, workers, ctas, static_workers_per_cta, fixed):
    ws = [w + fixed for w in weights]
    ideal = sum(ws) / workers
    if static_workers_per_cta:
        load = [0.0] * workers
        for t, w in enumerate(ws):
            c, i = t % ctas, t // ctas
            load[c * static_workers_per_cta + i % static_workers_per_cta] += w
        return max(load) / ideal
    heap = [(0.0, i) for i in range(workers)]
    for w in ws:
        l, i = heapq.heappop(heap)
        heapq.heappush(heap, (l + w, i))
    return max(l for l, _ in heap) / ideal


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--fixed", type=float, default=1.0, help="per-tile cost in blocks (epilogue, pipeline)")
    ap.add_argument("--seeds", type=int, default=5)
    a = ap.parse_args()
    nb = 4096 // a.block
    print(f"b = {a.block}, {nb} x {nb} blocks, {a.sms} CTAs, fixed cost {a.fixed} block(s) per tile; "
          "makespan / balanced, mean over seeds")
    print(f"{'density':>8} {'kernel':>10} {'static':>7} {'dynamic':>7} {'heavy':>7} {'heavy-chunk':>7}")
    for d in (0.05, 0.1, 0.25, 0.5):
        for kernel, rows, per_cta in (("grouped", 256, 1), ("one-col", 128, 2)):
            acc = {"static": 0.0, "dynamic": 0.0, "heavy": 0.0, "heavy-chunk": 0.0}
            for seed in range(a.seeds):
                g = torch.Generator().manual_seed(seed)
                mask = random_mask(nb, nb, d, generator=g)  # (block rows of W = output columns, k)
                per_col = mask.sum(1).tolist()
                panels = 8192 // rows
                workers = a.sms * per_cta
                rot = list(tiles(per_col, panels, "rotated"))
                acc["static"] += makespan(rot, workers, a.sms, per_cta, a.fixed)
                acc["dynamic"] += makespan(rot, workers, a.sms, 0, a.fixed)
                acc["heavy"] += makespan(list(tiles(per_col, panels, "heavy")), workers, a.sms, 0, a.fixed)
                chunk = -(-workers // nb)  # the panels a wave of tiles spans
                acc["heavy-chunk"] += makespan(list(tiles(per_col, panels, "heavy", chunk)), workers, a.sms, 0, a.fixed)
            print(f"{d:8.2f} {kernel:>10} " + " ".join(f"{acc[k] / a.seeds:7.3f}" for k in acc))


if __name__ == "__main__":
    main()
