#!/usr/bin/env bash
# Session 36, call 6 (the host-planned splits' wheel): the kept-T0 register-tile backward's instruction mix outside
# its k loops, as call 1 measured the forward's: ncu source counters (csv back) of kron_fast_bwd at
# 1024 × (64 ⊗ 64) and 1024 × (32 ⊗ 32) again, after calls 4-5 (backward / forward still 2.59 and 2.51).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
for c in "1024 64,64" "1024 32,32"; do
  f=$OUT/src_bwdkept_${c// /_}.csv; f=${f//,/x}
  timeout $(cap 150) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:kron_fast_bwd \
    --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass \
    python3 $R/tools/diag/kron_bwd_kept.py $c > $f 2>/dev/null
  echo "== $c"; python3 $R/tools/diag/ncu_sass_mix.py $f 10 | head -8
done
echo "total $((SECONDS - T0))s"
