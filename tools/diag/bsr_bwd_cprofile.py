"""cProfile of 300 BlockSparseLinear backward calls (8192 × 4096 → 4096, bf16, b = 128, d = 0.05;
x and weight gradients, as the bench asks), after warm-up: where the host time per call goes.
BWD_BIAS=0 makes the bias not require a gradient (as the bench's dense anchor)."""
import cProfile, os, pstats, time, torch
import sparsekern

dev = torch.device("cuda")
x = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16, requires_grad=True)
go = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16)
layer = sparsekern.BlockSparseLinear(4096, 4096, density=0.05, block_size=128, device=dev, dtype=torch.bfloat16)
if os.environ.get("BWD_BIAS") == "0":
    layer.bias.requires_grad_(False)
y = layer(x)
fn = lambda: torch.autograd.grad(y, (x, layer.weight), go, retain_graph=True)
for _ in range(20):
    fn()
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(300):
    fn()
print(f"host {1e6 * (time.perf_counter() - t0) / 300:.1f} us/call (bias grad {os.environ.get('BWD_BIAS', '1')})")
torch.cuda.synchronize()
pr = cProfile.Profile()
pr.enable()
for _ in range(300):
    fn()
pr.disable()
torch.cuda.synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(22)
