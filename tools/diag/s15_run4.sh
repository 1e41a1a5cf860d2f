#!/usr/bin/env bash
# Session 15, call 4: call 3's multicast run printed nothing in 400 s (a hang at its first case,
# 8192 x 4096 -> 4096 bf16 d = 0.05, the first with the dynamic schedule). This wheel builds the
# cluster kernel with the barrier watchdog (a stuck wait prints its barrier and traps): the case
# under the static and the dynamic schedule, then kernel µs with the static schedule for both
# the multicast and the one-column kernel.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cat > /tmp/case.py <<'PY'
import sys, torch, sparsekern
dev = torch.device("cuda")
m, k, n, d = 8192, 4096, 4096, float(sys.argv[1])
g = torch.Generator().manual_seed(1234)
w = sparsekern.BlockSparseMatrix.random((n, k), 128, d, dtype=torch.bfloat16, device=dev, generator=g)
x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
y = sparsekern.bsr.dds(x, w.t()); torch.cuda.synchronize()
r = x.double() @ w.to_dense().double().t()
print("case", d, ((y.double() - r).norm() / r.norm()).item())
PY
for d in 0.05 0.5; do
  SPARSEKERN_BSR_MULTICAST=1 SPARSEKERN_BSR_SCHEDULE=static timeout 40 python3 /tmp/case.py $d 2>&1 | tail -4; echo "static $d exit $?"
  SPARSEKERN_BSR_MULTICAST=1 SPARSEKERN_BSR_SCHEDULE=dynamic timeout 40 python3 /tmp/case.py $d 2>&1 | tail -4; echo "dynamic $d exit $?"
  SPARSEKERN_BSR_MULTICAST=1 timeout 40 python3 /tmp/case.py $d 2>&1 | tail -4; echo "auto(heavy) $d exit $?"
done
BSR_MC_DTYPES=bf16 BSR_MC_SHAPES=8192x4096x4096,8192x768x3072,8192x3072x768 timeout $(cap 420) python3 $R/tools/diag/bsr_mc.py multicast-static one-column-static > $OUT/bsr_mc.txt 2>&1; echo "bsr_mc exit $?"
cat $OUT/bsr_mc.txt | tail -30
echo "total $((SECONDS - T0))s after install"
