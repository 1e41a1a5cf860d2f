#!/usr/bin/env bash
# Session 36, call 11 (the final wheel): the small-factor forward (kron_small) at 1024 × (16)^3 and
# 1024 × (8)^4, 43.8% and 55.5% of the H200's roofline in call 8: ncu source counters (csv back)
# for tools/diag/ncu_regions.py, as calls 1, 3 and 6 did for the register-tile kernels.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
for c in "1024 16,16,16" "1024 8,8,8,8"; do
  f=$OUT/src_small_fwd_${c// /_}.csv; f=${f//,/x}
  timeout $(cap 150) ncu --section SourceCounters --section WarpStateStats --section LaunchStats --kernel-name regex:kron_small_kernel \
    --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass \
    python3 $R/tools/diag/kron_fwd_one.py $c auto > $f 2>/dev/null
  echo "== $c"; python3 $R/tools/diag/ncu_sass_mix.py $f 8 2>/dev/null | head -7
done
echo "total $((SECONDS - T0))s"
