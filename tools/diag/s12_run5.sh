#!/usr/bin/env bash
# Session 12, fifth call: the natural-order split in the backward too. Every kron CUDA test; the
# forward split against the generic plan (kron_natural.py) and the backward split against the
# generic native backward and the step-wise one (kron_bwd_natural.py); compute-sanitizer memcheck
# of both splits; the full kron bench and its summary.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_cuda_tests 150
cd $R/tools/diag && timeout $(cap 200) python3 kron_natural.py | grep -v "^   kernels"
timeout $(cap 280) python3 kron_bwd_natural.py; cd /tmp
cat > /tmp/san.py <<'PY'
import math, torch
from sparsekern import kron_matmul, kron as K
for b, ps in [(7, [16, 16, 16, 16]), (5, [32, 32, 32]), (3, [8, 8, 8, 8, 8])]:
    x = torch.randn(b, math.prod(ps), device="cuda"); fs = [torch.randn(p, p, device="cuda") for p in ps]
    y = kron_matmul(x, fs)
    out = K._backward(x, fs, torch.randn_like(y), [True] * (len(fs) + 1))
    torch.cuda.synchronize()
print("cases ok")
PY
timeout $(cap 330) compute-sanitizer --tool memcheck python3 /tmp/san.py > /tmp/san_memcheck.txt 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY|cases ok' /tmp/san_memcheck.txt | tr '\n' ' ')"
export PYTHONPATH=$R/.fastkron${PYTHONPATH:+:$PYTHONPATH}
diag_kron_bench 540 > /tmp/bench_rows.txt; head -1 /tmp/bench_rows.txt
python3 -m sparsekern.bench.kron $OUT/kron.json | grep -v "^no FastKron"
echo "total $((SECONDS - T0))s after install"
