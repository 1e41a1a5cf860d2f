#!/usr/bin/env bash
# Session 12, last call (about 4 minutes of device time left): the Python-side choice of the
# natural split's backward (kron.py: _natural_backward, now a one-row planner probe that is skipped
# while tracing) on the GPU: the natural-split and torch.compile kron tests, and the choice itself.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 100) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "natural or compile" 2>&1 | tail -1
timeout $(cap 120) python3 - <<'PY'
import torch
from sparsekern import kron as K
x = torch.randn(128, 32768, device="cuda"); fs = [torch.randn(32, 32, device="cuda") for _ in range(3)]
print("steps wanted for (128,[32]^3):", K._steps_wanted(x, fs), "| natural:", K._natural_backward(x, fs, [(32, 32)] * 3))
xg = x.clone().requires_grad_(); y = K.kron_matmul(xg, fs); y.sum().backward(); torch.cuda.synchronize()
print("autograd ok", xg.grad.shape)
PY
echo "total $((SECONDS - T0))s after install"
