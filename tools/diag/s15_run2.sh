#!/usr/bin/env bash
# Session 15, call 2: the cluster (TMA multicast) dds for 16-bit blocks of 128 (dds_mc_sm90.cuh).
# A one-case smoke under a short timeout (a barrier bug hangs), its SASS, the bsr CUDA tests of
# dds / linear layers / gradients with the kernel forced, memcheck on a few, then kernel µs of the
# three kernels side by side (tools/diag/bsr_mc.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
SO=$(python3 -c "import sparsekern._C as c; print(c.__file__)")
cuobjdump -sass $SO | awk "/Function : .*dds_mc_kernel/{f=1} /Function : /&&!/dds_mc_kernel/{f=0} f" 2>/dev/null | grep -oE "HGMMA\.[0-9x]+[^ ]*|UTMALDG[^ ]*|SYNCS\.[A-Z.]+|UCGABAR[^ ;]*|STAS[^ ;]*" | sort | uniq -c | head -20
cat > /tmp/smoke.py <<'PY'
import torch, sparsekern
dev = torch.device("cuda")
for m in (8192, 7, 384):
    w = sparsekern.BlockSparseMatrix.random((1024, 1024), 128, 0.3, dtype=torch.bfloat16, device=dev)
    x = torch.randn(m, 1024, device=dev, dtype=torch.bfloat16)
    y = sparsekern.bsr.dds(x, w.t()); dx = sparsekern.bsr.dds(x, w)
    torch.cuda.synchronize()
    r = x.double() @ w.to_dense().double().t(); r2 = x.double() @ w.to_dense().double()
    print("smoke", m, ((y.double() - r).norm() / r.norm()).item(), ((dx.double() - r2).norm() / r2.norm()).item())
PY
SPARSEKERN_BSR_MULTICAST=1 timeout 60 python3 /tmp/smoke.py; echo "smoke exit $?"
SPARSEKERN_BSR_MULTICAST=1 timeout 60 compute-sanitizer --tool memcheck python3 /tmp/smoke.py 2>&1 | tail -3
SPARSEKERN_BSR_MULTICAST=1 SPARSEKERN_BSR_SCHEDULE=static timeout 60 python3 /tmp/smoke.py; echo "smoke static exit $?"
SPARSEKERN_BSR_MULTICAST=1 diag_bsr_cuda_tests 150 "(dds or linear or grad) and not each_kernel"
timeout $(cap 560) python3 $R/tools/diag/bsr_mc.py > $OUT/bsr_mc.txt 2>&1; echo "bsr_mc exit $?"
sed -n '/kernel µs/,$p' $OUT/bsr_mc.txt
echo "total $((SECONDS - T0))s after install"
