"""SemiStructuredLinear under torch.compile(mode="reduce-overhead") with CUDA-graph trees' allocation
history on: when the tree refuses its graph ("tensor(s) in the cudagraph pool not tracked as
outputs"), the error names the Python stack of each allocation it found (session 25). Prints the
2:4 choice made and whether three calls agreed with eager."""
import traceback

import torch
import torch._inductor.config as icfg

import sparsekern as sk
from sparsekern import semi as sksemi
from sparsekern.testing import rel_error

icfg.triton.cudagraph_trees_history_recording = True
dev = torch.device("cuda")
torch.manual_seed(6)
layer = sk.SemiStructuredLinear.from_dense(torch.nn.Linear(512, 256, device=dev, dtype=torch.float16))
compiled = torch.compile(layer, mode="reduce-overhead")
try:
    for i in range(3):
        x = torch.randn(640, 512, device=dev, dtype=torch.float16, requires_grad=True)
        go = torch.randn(640, 256, device=dev, dtype=torch.float16)
        y = compiled(x)
        gx, = torch.autograd.grad(y, [x], go)
        y = y.clone()
        y_e = layer(x)
        want, = torch.autograd.grad(y_e, [x], go)
        print(f"call {i}: y {rel_error(y, y_e):.2e} gx {rel_error(gx, want):.2e}")
except Exception as e:  # noqa: BLE001
    msg = str(e)
    print(msg[:6000])
print("stats", sk.semi_plan_stats())
for r in sksemi.search_report():
    print("choice", r.get("chosen"), r.get("shape"))
