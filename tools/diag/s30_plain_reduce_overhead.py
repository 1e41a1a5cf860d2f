# Session 30, call 9: torch.compile(mode="reduce-overhead") of a plain nn.Linear (no sparsekern),
# used as documented (a step mark per call, outputs cloned), run with and without compute-sanitizer
# memcheck: does the sanitizer alone trip torch's "tensor(s) in the cudagraph pool" check?
# Result (inline command of call 9): inconclusive. Without the sanitizer this loop already fails
# ("accessing tensor output of CUDAGraphs that has been overwritten"), so it is not a clean
# reproduction either; under memcheck it raised the pool check (0 memcheck errors).
import torch
torch.manual_seed(0)
lin = torch.nn.Linear(256, 256, device="cuda")
f = torch.compile(lin, mode="reduce-overhead")
for i in range(3):
    torch.compiler.cudagraph_mark_step_begin()
    x = torch.randn(64, 256, device="cuda", requires_grad=True)
    y = f(x)
    y.sum().backward()
    y = y.clone()
print("plain torch reduce-overhead: ok")
