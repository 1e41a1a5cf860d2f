#!/usr/bin/env bash
# Written in session 12 (device time spent) for the next session; not run yet. Needs the wheel of
# tools/build_device_wheel.sh (carry .whl312). The small-factor backward's lean pool
# ("small:lean=1", opt-in) and the natural split's mode-0 pass (SPARSEKERN_KRON_HEAD=kernel,
# opt-in): every kron CUDA test (both included), their times against the defaults
# (kron_bwd_lean.py, kron_head.py), compute-sanitizer memcheck and racecheck of them.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 150
cd $R/tools/diag && timeout $(cap 230) python3 kron_bwd_lean.py
timeout $(cap 300) python3 kron_head.py; cd /tmp
cat > /tmp/san.py <<'PY'
import torch
from sparsekern import _C, kron as K
_C.kron_set_backward_kernel("small:grid=5,lean=1")
for b, ps in [(37, [8, 8, 8, 8]), (5, [16, 16, 32]), (11, [4, 4, 4, 4, 4]), (6, [16, 8, 8])]:
    n = 1
    for p in ps:
        n *= p
    x = torch.randn(b, n, device="cuda"); fs = [torch.randn(p, p, device="cuda") for p in ps]
    out = K._backward(x, fs, torch.randn(b, n, device="cuda"), [True] * (len(fs) + 1))
    torch.cuda.synchronize()
import os
os.environ["SPARSEKERN_KRON_HEAD"] = "kernel"
for b, ps in [(7, [16, 16, 16, 16]), (5, [32, 32, 32]), (3, [8, 8, 8, 8, 8])]:
    n = 1
    for p in ps:
        n *= p
    x = torch.randn(b, n, device="cuda"); fs = [torch.randn(p, p, device="cuda") for p in ps]
    y = K.kron_matmul(x, fs)
    out = K._backward(x, fs, torch.randn_like(y), [True] * (len(fs) + 1))
    torch.cuda.synchronize()
print("cases ok")
PY
diag_sanitize 420 /tmp/san.py
echo "total $((SECONDS - T0))s after install"
