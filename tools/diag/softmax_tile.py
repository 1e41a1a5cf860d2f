"""Forward softmax (32,12,512,512) fp16/bf16: % of the copy bandwidth, with the error against
float64. Session 6 ran it under a since-removed SPARSEKERN_SOFTMAX_TILE switch (row tiles 8x64,
16x32, 64x8 against the default 32x16: 53 / 82 / 78% against 86.1% fp16, 85.5% bf16)."""
import os, torch
import sparsekern
from sparsekern.bench import time_ms
from sparsekern.testing import rel_error

dev = torch.device("cuda")
src = torch.empty(1 << 28, dtype=torch.uint8, device=dev)
dst = torch.empty_like(src)
ceil = 2 * src.numel() / time_ms(lambda: dst.copy_(src), dev) / 1e9
del src, dst
tag = os.environ.get("SPARSEKERN_SOFTMAX_TILE", "default")
for dtype in (torch.float16, torch.bfloat16):
    x = (torch.randn(32, 12, 512, 512, device=dev) * 3).to(dtype)
    err = rel_error(sparsekern.inplace_softmax(x.clone()), torch.softmax(x.double(), -1))
    ms = min(time_ms(lambda: sparsekern.inplace_softmax(x), dev) for _ in range(3))
    print(f"softmax {tag:8s} {str(dtype)[6:]:9s} {ms * 1e3:7.1f} us {100 * 2 * x.numel() * 2 / ms / 1e9 / ceil:5.1f}% err {err:.2e}")
