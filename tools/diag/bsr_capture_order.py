"""Session 26's one failure of the concurrent weight gradient, isolated: under compute-sanitizer, a
capture of the layer's backward (sparsekern.testing.capture_graph) after an eager backward on the
default stream failed with cudaErrorStreamCaptureImplicit. argv: eager_first (0 | 1), concurrent
(0 | 1). Prints "ok" and the replay's agreement with the eager gradients, or the exception. Run each
combination in a fresh process, with and without `compute-sanitizer --tool memcheck`."""
import sys

import torch

from sparsekern import BlockSparseLinear, bsr
from sparsekern.testing import capture_graph

eager_first, concurrent = sys.argv[1] == "1", sys.argv[2] == "1"
dev = torch.device("cuda")
torch.manual_seed(32 + 129)
layer = BlockSparseLinear(256, 192, bias=True, density=0.3, block_size=32, device=dev, dtype=torch.bfloat16)
params = (layer.weight, layer.bias)
x = torch.randn(129, 256, device=dev, dtype=torch.bfloat16)
go = torch.randn(129, 192, device=dev, dtype=torch.bfloat16)


def step():
    xg = x.clone().requires_grad_()
    return torch.autograd.grad(layer(xg), (xg, *params), go)


bsr._concurrent_grads = False
ref = step() if eager_first else None
bsr._concurrent_grads = concurrent
try:
    graph, outs = capture_graph(step)
    graph.replay()
    torch.cuda.synchronize()
except Exception as e:  # noqa: BLE001 - the point is to see it
    print(f"eager_first={int(eager_first)} concurrent={int(concurrent)}: {type(e).__name__}: {str(e)[:300]}")
    sys.exit(0)
bsr._concurrent_grads = False
ref = ref if ref is not None else step()
same = all(torch.equal(a, b) for a, b in zip(ref[:2], outs[:2]))
print(f"eager_first={int(eager_first)} concurrent={int(concurrent)}: ok, input/weight gradients equal {same}")
