"""The `sparsekern` command: `sparsekern check` and `sparsekern bench`."""
from __future__ import annotations

import argparse
import sys

import torch


def _device(name: str | None) -> torch.device:
    from .check import best_device

    if name is None:
        return best_device()
    try:
        dev = torch.device(name)
    except RuntimeError:
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise SystemExit(f"sparsekern: --device must be cpu or cuda[:N]; got {name!r}")
    if dev.type == "cuda":
        from . import cuda_available

        if not (torch.cuda.is_available() and cuda_available()):
            raise SystemExit("sparsekern: --device cuda requested but no CUDA device is usable here")
    return dev


def main(argv=None) -> int:
    from . import bench, check

    p = argparse.ArgumentParser(prog="sparsekern", description=(
        "sparsekern: check every op against a float64 reference, or benchmark each op against "
        "its torch counterpart. Runs on the GPU when one is usable, else on the CPU."))
    sub = p.add_subparsers(dest="cmd", required=True)

    pc = sub.add_parser("check", help="run every available op against a float64 reference and print a table")
    pc.add_argument("--device", help="cpu or cuda[:N] (default: cuda if usable, else cpu)")
    pc.add_argument("--family", action="append", choices=check.FAMILIES, help="only these op families")
    pc.add_argument("--quick", action="store_true", help="fewer dtypes/shapes")

    pb = sub.add_parser("bench", help="time each op against its torch counterpart in the same run")
    pb.add_argument("--device", help="cpu or cuda[:N] (default: cuda if usable, else cpu)")
    pb.add_argument("--family", action="append", choices=bench.FAMILIES, help="only these op families")
    size = pb.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="quick", action="store_true", default=True,
                      help="small grid (default)")
    size.add_argument("--full", dest="quick", action="store_false",
                      help="the full target grid of every family (on CUDA; the CPU runs the small grid either way)")
    pb.add_argument("--json", default="sparsekern-bench.json",
                    help="where to write the JSON results, replacing that file (default: ./sparsekern-bench.json; "
                         "'' writes none)")

    from . import kron_cli

    kron_cli.add_parser(sub)  # `sparsekern kron …`: runs through args.handler

    args = p.parse_args(argv)
    if getattr(args, "handler", None) is not None:
        return args.handler(args)
    dev = _device(args.device)
    if args.cmd == "check":
        rows = check.run(dev, args.family, quick=args.quick)
        return 0 if all(r["ok"] for r in rows) else 1
    if args.cmd == "bench":
        if args.json:  # an argparse error (exit 2) before the run; bench.run checks it too
            try:
                bench.check_writable(args.json, "--json")
            except ValueError as e:
                p.error(str(e))
        res = bench.run(dev, args.family, quick=args.quick, json_path=args.json)
        return 0 if all(r.get("verified", True) for r in res["rows"]) else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
