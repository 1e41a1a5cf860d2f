#!/usr/bin/env bash
# Session 25, call 2: where the host time of an eager kron forward goes on the device machine
# (tools/diag/kron_host.py cuda --profile; the bench's eager rows of the small cases are 44-58 µs
# against 6-19 µs of kernels), and the same for BlockSparseLinear (bsr_host_api.py), at 88de286
# (the wheel of ea94ece: same sources).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
(cd $R/tools/diag && timeout $(cap 150) python3 kron_host.py cuda --profile 2>&1 | grep -v "Warning\|_warn_once" | tee $OUT/kron_host.txt)
(cd $R/tools/diag && timeout $(cap 300) python3 bsr_host_api.py "bfloat16:128:0.1" 2>&1 | grep -v "Warning\|_warn_once" | tee $OUT/bsr_host.txt | head -80)
echo "total $((SECONDS - T0))s"
