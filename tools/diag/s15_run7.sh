#!/usr/bin/env bash
# Session 15, call 7 (H100, wheel of 9fc807d): where the warps of the grouped dds wait (bf16 b = 128
# d = 0.25: tensor pipe 63% busy against cuBLAS's 91% at the same shape, call 6), stall-sampled
# SASS (tools/diag/ncu_stalls.py); the same for the one-column kernel at that cell and for the
# kron register-tile forward at 1024 x (32 x 32) (9.3 µs where a copy of its bytes takes 2.3).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
for g in 1 0; do
  c=/tmp/ncu_dds_g$g.csv
  SPARSEKERN_BSR_GROUPED=$g timeout $(cap 150) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:dds_kernel --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass python3 $R/tools/diag/bsr_one.py 128 0.25 bfloat16 > $c 2>/dev/null
  echo "== dds b=128 d=0.25 bf16, SPARSEKERN_BSR_GROUPED=$g"
  python3 $R/tools/diag/ncu_stalls.py $c 16 | cut -c1-200 | tee $OUT/ncu_stalls_dds_g$g.txt
done
diag_ncu_kron_fwd 330 1024 32,32 auto "kron|fast"
echo "total $((SECONDS - T0))s after install"
