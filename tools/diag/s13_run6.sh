#!/usr/bin/env bash
# Session 13, call 6: the kron CUDA tests with the mode-0 pass as the default for heads ≤ 8
# (natural split tests under auto, kernel and gemm), the head times under the default, and
# memcheck of an auto-head forward and backward.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 150
cd $R/tools/diag && timeout $(cap 220) python3 - > $OUT/kron_head_auto.txt 2>&1 <<'PY'
import os, torch
from sparsekern import kron_matmul, kron as K, _C
from sparsekern.bench import graph_time_ms
from kron_profile import square_case
dev = torch.device("cuda"); g = torch.Generator().manual_seed(0)
for batch, sizes in [(256, [8] * 5), (64, [8, 16, 16, 16]), (256, [16] * 4), (128, [32] * 3)]:
    x, fs, gy = square_case(batch, sizes, g, dev)
    os.environ.pop("SPARSEKERN_KRON_HEAD", None)
    plan = _C.kron_describe_plan(torch.utils.dlpack.to_dlpack(x), [torch.utils.dlpack.to_dlpack(f) for f in fs], False)
    t = 1e3 * graph_time_ms(lambda: kron_matmul(x, fs), dev)
    head = [l for l in plan.splitlines() if "modes 0" in l]
    print(f"{batch}x{sizes}: default fwd {t:7.1f} us | {head[0] if head else plan.splitlines()[0]}", flush=True)
PY
cat $OUT/kron_head_auto.txt
cat > /tmp/san_head.py <<'PY'
import torch
from sparsekern import kron as K
for b, ps in [(7, [8, 8, 8, 8, 8]), (3, [4, 8, 8, 8, 8]), (5, [8, 16, 16, 16])]:
    n = 1
    for p in ps:
        n *= p
    x = torch.randn(b, n, device="cuda"); fs = [torch.randn(p, p, device="cuda") for p in ps]
    y = K.kron_matmul(x, fs)
    out = K._backward(x, fs, torch.randn_like(y), [True] * (len(fs) + 1))
    torch.cuda.synchronize()
print("cases ok")
PY
timeout $(cap 330) compute-sanitizer --tool memcheck python3 /tmp/san_head.py > $OUT/kron_head_memcheck.txt 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY|cases ok' $OUT/kron_head_memcheck.txt | tr '\n' ' ')"
echo "total $((SECONDS - T0))s after install"
