"""Top SASS lines by sampled warp stalls from `ncu --page source --csv --print-source sass` output
(argv[1]): prints each line's address, instruction, its share of all samples and its top stall
reasons, so a latency-bound kernel's waiting point shows up without the GUI."""
import sys

from ncu_csv import num, read_source_csv  # this folder

head, body, col = read_source_csv(sys.argv[1])
if head is None:
    print("no stall-sampling columns; header candidates:", body[:2])
    sys.exit(0)
tot_k = next(k for name, k in col.items() if name.startswith("Warp Stall Sampling (All Samples)"))
src_k = next((k for name, k in col.items() if name in ("Source", "# Source")), 1)
addr_k = col.get("Address", 0)
stall_cols = [(name, k) for name, k in col.items() if name.startswith("stall_") or "Stall" in name and k != tot_k]


lines = [(num(r[tot_k]), r) for r in body if len(r) > tot_k]
total = sum(v for v, _ in lines) or 1.0
print(f"samples {total:.0f}; columns: {[n for n, _ in stall_cols][:12]}")
for v, r in sorted(lines, key=lambda t: -t[0])[:int(sys.argv[2]) if len(sys.argv) > 2 else 14]:
    reasons = sorted(((num(r[k]), n) for n, k in stall_cols if k < len(r)), reverse=True)[:3]
    print(f"{r[addr_k]:>8} {100 * v / total:5.1f}%  {r[src_k][:60]:60s} " + ", ".join(f"{n}={x:.0f}" for x, n in reasons if x > 0))
