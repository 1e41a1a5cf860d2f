"""Where a kernel's executed instructions go, by region of its SASS, from an `ncu --section
SourceCounters --page source --csv --print-source sass` export (argv[1]): the innermost loops
(bodies of backward branches holding no other one) with their share of the executed
instructions, trips per warp and opcode mix, then the straight-line code between them grouped
into runs of executed lines, largest first. WARPS (argv[2]) is the launch's warp count (blocks ×
warps per block), for per-warp figures. Session 36 found the register-tile kron kernels' factor
copies and store paths this way. Usage: python ncu_regions.py CSV WARPS [TOP]"""
import re
import sys
from collections import Counter

from ncu_csv import num, read_source_csv  # this folder

head, body, col = read_source_csv(sys.argv[1])
nwarps = float(sys.argv[2])
top = int(sys.argv[3]) if len(sys.argv) > 3 else 20
src_k = next((k for n, k in col.items() if n in ("Source", "# Source")), 1)
exe_k = next(k for n, k in col.items() if n.startswith("Instructions Executed"))
smp_k = next(k for n, k in col.items() if n.startswith("Warp Stall Sampling (All Samples)"))
rows = []
for r in body:
    if len(r) <= max(src_k, exe_k, smp_k) or not r[0].startswith("0x"):
        continue
    rows.append((int(r[0], 16), r[src_k].strip(), num(r[exe_k]), num(r[smp_k])))
rows.sort()
base = rows[0][0]
at = {a: i for i, (a, _, _, _) in enumerate(rows)}


def opcode(s: str) -> str:
    w = s.split()
    if not w:
        return ""
    return (w[1] if w[0].startswith("@") and len(w) > 1 else w[0]).split(".")[0]


loops = []
for i, (a, s, _, _) in enumerate(rows):
    m = re.search(r"BRA (0x[0-9a-f]+)", s)
    if m and int(m.group(1), 16) < a and int(m.group(1), 16) in at:
        loops.append((at[int(m.group(1), 16)], i))
inner = [(lo, hi) for lo, hi in loops
         if not any(lo <= l2 and h2 <= hi and (l2, h2) != (lo, hi) for l2, h2 in loops)]
total = sum(r[2] for r in rows) or 1.0
print(f"executed {total:.0f} instructions, {total / nwarps:.0f} per warp; "
      f"FFMA {100 * sum(r[2] for r in rows if opcode(r[1]) == 'FFMA') / total:.1f}%")
marked = set()
for lo, hi in inner:
    ex = sum(rows[k][2] for k in range(lo, hi + 1))
    if ex == 0:
        continue
    mix = Counter(opcode(rows[k][1]) for k in range(lo, hi + 1))
    print(f"loop {rows[lo][0] - base:6x}-{rows[hi][0] - base:6x}: {hi - lo + 1} instructions, "
          f"{100 * ex / total:.1f}% executed, {rows[hi][2] / nwarps:.1f} trips per warp, {dict(mix.most_common(5))}")
    marked.update(range(lo, hi + 1))
runs, cur = [], None
for i, (a, s, ex, st) in enumerate(rows):
    if i in marked or ex == 0:
        if cur:
            runs.append(cur)
        cur = None
        continue
    if cur is None:
        cur = [a, a, 0.0, 0.0, Counter()]
    cur[1] = a
    cur[2] += ex
    cur[3] += st
    cur[4][opcode(s)] += ex
if cur:
    runs.append(cur)
outside = sum(r[2] for r in runs)
print(f"outside the innermost loops: {100 * outside / total:.1f}% of the executed instructions")
for lo, hi, ex, st, mix in sorted(runs, key=lambda r: -r[2])[:top]:
    print(f"  {lo - base:6x}-{hi - base:6x}: {ex / nwarps:6.0f} per warp ({100 * ex / total:.1f}%), "
          f"{st:.0f} stall samples, {dict(mix.most_common(6))}")
