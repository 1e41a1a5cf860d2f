"""cuBLAS TF32 GEMM time by operand layout for the weight gradient's shape (C = A · B, 4096 × 4096,
K = 8192 rows of the batch): A as dYᵀ (M-major, a view of row-major dY) or K-major (a transposed
copy), B as X (N-major) or K-major; plus the time of the copies that would make them K-major.
Device µs of 20-call CUDA graphs (tools/diag/graphtime.py)."""
import torch
from graphtime import graph_time

torch.backends.cuda.matmul.allow_tf32 = True
dev = torch.device("cuda")
m = n = 4096
k = 8192
dy = torch.randn(k, m, device=dev)   # row-major: dYᵀ is M-major
x = torch.randn(k, n, device=dev)    # row-major: N-major B
dy_t = dy.t().contiguous()           # K-major A
x_t = x.t().contiguous()             # K-major B (as its transpose, row-major n × k)
out = torch.empty(m, n, device=dev)
cases = {
    "A M-major, B N-major (dYᵀ · X as given)": lambda: torch.mm(dy.t(), x, out=out),
    "A K-major, B N-major": lambda: torch.mm(dy_t, x, out=out),
    "A M-major, B K-major": lambda: torch.mm(dy.t(), x_t.t(), out=out),
    "A K-major, B K-major": lambda: torch.mm(dy_t, x_t.t(), out=out),
    "copy dY -> dYᵀ (134 MB)": lambda: dy_t.copy_(dy.t()),
}
for name, fn in cases.items():
    print(f"{name:42s} {graph_time(fn):8.1f} us", flush=True)
