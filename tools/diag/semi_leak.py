"""Who holds the cuSPARSELt plans at exit? (test_semi_cuda_no_leak_warning_at_exit fails only under
compute-sanitizer: nanobind reports 2 SemiLinearPlan instances alive at teardown.) Records every
SemiLinearPlan the module makes during the test's call, runs sparsekern's exit hook, and prints
each plan's outside references (refcount beyond this script's own) and their holders."""
import gc
import sys

import torch

import sparsekern as sk
from sparsekern import semi

made = []
real_make_plan = semi._Problem.make_plan


def make_plan(self, yt, algorithm=-1):
    plan, ws = real_make_plan(self, yt, algorithm)
    made.append(plan)
    return plan, ws


semi._Problem.make_plan = make_plan
layer = sk.SemiStructuredLinear(64, 32, device="cuda", dtype=torch.float16)
x = torch.randn(16, 64, device="cuda", dtype=torch.float16)
with torch.no_grad():
    layer(x)
print("chosen:", semi.search_report()[-1]["chosen"])
for c in semi.search_report()[-1]["candidates"]:
    print("   ", c)


def holders(p):
    out = []
    for r in gc.get_referrers(p):
        if r is made:
            continue
        desc = type(r).__name__
        if isinstance(r, dict):
            desc += f" keys={list(r.keys())[:8]}"
        elif hasattr(r, "f_code"):
            desc += f" frame {r.f_code.co_name}"
        out.append(desc)
    return out


for when in ("before the exit hook", "after the exit hook"):
    if when.startswith("after"):
        sk._release_at_exit()
        gc.collect()
    print(when + ":", [(sys.getrefcount(p) - 3, holders(p)) for p in made])
made.clear()
