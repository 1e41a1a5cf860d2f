"""`sparsekern check`: every available op against a float64 reference, on the best device here.

Each family module in this package exposes ``run(device, quick) -> list[dict]`` whose rows carry
``op``, ``dtype``, ``shape``, ``rel_err`` and ``tol``; this runner adds ``device`` and ``ok``.
"""
from __future__ import annotations

import importlib
import sys

import torch

FAMILIES = ["dense", "csr", "semi", "inplace", "kron", "bsr"]


def best_device() -> torch.device:
    from .. import cuda_available

    return torch.device("cuda") if torch.cuda.is_available() and cuda_available() else torch.device("cpu")


def run(device: torch.device | None = None, families=None, quick: bool = False, out=None) -> list[dict]:
    out = sys.stdout if out is None else out  # read per call: pytest and others swap sys.stdout
    device = device or best_device()
    rows: list[dict] = []
    for fam in families or FAMILIES:
        mod = importlib.import_module(f"{__name__}.{fam}")
        try:
            fam_rows = list(mod.run(device, quick))
        except Exception as e:  # noqa: BLE001 - an op that raises is a failure of its family, not of the run
            fam_rows = [dict(op="(raised)", dtype="-", shape="-", rel_err=float("inf"), tol=0.0,
                             error=f"{type(e).__name__}: {e}")]
        for row in fam_rows:
            row.setdefault("family", fam)
            row["device"] = str(device)
            row["ok"] = bool(row["rel_err"] <= row["tol"])
            rows.append(row)
    _print_table(rows, out)
    for r in rows:
        if "error" in r:
            print(f"{r['family']}: {r['error']}", file=out)
    return rows


def _print_table(rows, out) -> None:
    cols = ["family", "op", "dtype", "shape", "device", "rel_err", "tol", "ok"]
    cells = [[r["family"], r["op"], r["dtype"], r["shape"], r["device"], f"{r['rel_err']:.2e}",
              f"{r['tol']:.0e}", "PASS" if r["ok"] else "FAIL"] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) if cells else len(c) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)), file=out)
    for x in cells:
        print("  ".join(v.ljust(w) for v, w in zip(x, widths)), file=out)
    bad = sum(not r["ok"] for r in rows)
    print(f"{len(rows) - bad} passed, {bad} failed", file=out)
