"""Totals of an `ncu --section SourceCounters --page source --csv --print-source sass` export
(argv[1]): sampled warp stalls per reason over the whole kernel, and per SASS opcode (the first
word of each line, predicate dropped) the instructions executed and the stall samples, so that the
instruction mix and where the waiting happens show up with names. Usage: python ncu_sass_mix.py CSV [N]"""
import sys

from ncu_csv import num, read_source_csv  # this folder

head, body, col = read_source_csv(sys.argv[1])
top = int(sys.argv[2]) if len(sys.argv) > 2 else 16
if head is None:
    sys.exit("no stall-sampling columns in " + sys.argv[1])
tot_k = next(k for n, k in col.items() if n.startswith("Warp Stall Sampling (All Samples)"))
src_k = next((k for n, k in col.items() if n in ("Source", "# Source")), 1)
exe_k = next((k for n, k in col.items() if n.startswith("Instructions Executed")), None)
stalls = [(n, k) for n, k in col.items() if n.startswith("stall_") and "Not Issued" not in n]
total = sum(num(r[tot_k]) for r in body if len(r) > tot_k) or 1.0
print(f"samples {total:.0f}; stall reasons (share of all samples):")
sums = sorted(((sum(num(r[k]) for r in body if len(r) > k), n) for n, k in stalls), reverse=True)
print("  " + ", ".join(f"{n[6:]} {100 * v / total:.1f}%" for v, n in sums if v > 0.005 * total))
ops = {}
for r in body:
    if len(r) <= max(tot_k, src_k):
        continue
    words = r[src_k].split()
    if not words:
        continue
    op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    e = ops.setdefault(op, [0.0, 0.0])
    e[0] += num(r[exe_k]) if exe_k is not None else 0.0
    e[1] += num(r[tot_k])
ins = sum(v[0] for v in ops.values()) or 1.0
print(f"instructions executed {ins:.0f}; per opcode (share of instructions, share of samples):")
for op, (n, s) in sorted(ops.items(), key=lambda kv: -kv[1][0])[:top]:
    print(f"  {op:16s} {n:12.0f} {100 * n / ins:5.1f}%  {100 * s / total:5.1f}%")
