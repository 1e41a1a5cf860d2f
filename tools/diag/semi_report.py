"""The 2:4 timed choice at issue 6's target shape (8192 x 4096 -> 4096, bias), fp16 and bf16:
every candidate's time and error (sparsekern.semi.search_report()), the chosen one, and the module
call against dense F.linear (back-to-back CUDA-event timing)."""
import torch
import torch.nn.functional as F

import sparsekern as sk
from sparsekern import semi
from sparsekern.bench import time_ms

dev = torch.device("cuda")
for dtype in (torch.float16, torch.bfloat16):
    lin = torch.nn.Linear(4096, 4096, device=dev, dtype=dtype)
    layer = sk.SemiStructuredLinear.from_dense(lin)
    x = torch.randn(8192, 4096, device=dev, dtype=dtype)
    with torch.no_grad():
        layer(x)
        rep = semi.search_report()[-1]
        wm = (layer.weight * layer.mask).contiguous()
        t_dense = time_ms(lambda: F.linear(x, wm, layer.bias), dev)
        t_ours = time_ms(lambda: layer(x), dev)
    print(f"{dtype}: chosen {rep['chosen']}; module {t_ours:.4f} ms, dense F.linear {t_dense:.4f} ms, "
          f"ratio {t_ours / t_dense:.3f}")
    for c in rep["candidates"]:
        print("   ", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in c.items()})
