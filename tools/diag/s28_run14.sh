#!/usr/bin/env bash
# Session 28, call 14: why test_semi_cutlass_is_a_candidate failed in call 13 (bf16): the CUTLASS
# candidate rows of the timed choice, three fresh layers per dtype, printed whole.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 120) python3 - <<'PY' 2>&1 | grep -v Warn
import torch, sparsekern as sk
from sparsekern import semi
for dtype in (torch.float16, torch.bfloat16):
    for i in range(3):
        layer = sk.SemiStructuredLinear(512, 256, device="cuda", dtype=dtype)
        x = torch.randn(384, 512, device="cuda", dtype=dtype)
        with torch.no_grad():
            layer(x)
        rep = semi.search_report()[-1]
        print(str(dtype)[6:], i, rep["chosen"])
        for c in rep["candidates"]:
            if c.get("kind") == "cutlass":
                print("   ", {k: c.get(k) for k in ("algorithm", "ms", "rel_err", "error")})
PY
timeout $(cap 200) python3 -m pytest $R/tests/python/test_semi.py -q -p no:cacheprovider -m cuda -k cutlass_is_a_candidate 2>&1 | tail -1
echo "total $((SECONDS - T0))s"
