#!/usr/bin/env bash
# Session 18, call 10 (wheel of a15b7d1): the kernels of the backward where it takes more than 2.5x
# the forward: the natural split's products (128 x (32,32,32), 256 x (16,16,16,16)) and the
# small-factor ones, and the plans of their forward and backward.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 120) python3 $R/tools/diag/kron_bwd_kernels.py "128 32,32,32" "256 16,16,16,16" "1024 8,8,8,8" "1024 16,16,16"
timeout $(cap 150) python3 - <<'PY'
import math, torch
from sparsekern import _C
from sparsekern._core import as_dlpack
for b, ps in ((128, [32, 32, 32]), (256, [16, 16, 16, 16])):
    x = torch.empty(b, math.prod(ps), device="cuda")
    fs = [torch.empty(p, p, device="cuda") for p in ps]
    for bwd in (False, True):
        print(f"{b}x{ps} {'backward' if bwd else 'forward'}:\n" + _C.kron_describe_plan(as_dlpack(x), [as_dlpack(f) for f in fs], bwd))
PY
echo "total $((SECONDS - T0))s after install"
