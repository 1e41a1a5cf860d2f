#!/usr/bin/env bash
# Session 33, call 4 (wheel of c0b8490: the padded reduction): the small-factor backward at
# 1024 × (8)^4 and (16)^3 under ncu's SourceCounters, summed per stall reason and per SASS opcode
# (tools/diag/ncu_sass_mix.py), plus its top stalled lines (ncu_stalls.py); the same for the
# small-factor forward at (16)^3 for comparison.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
for c in "8,8,8,8" "16,16,16"; do
  f=$OUT/src_bwd_${c//,/x}.csv
  timeout $(cap 250) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:kron_small_bwd \
    --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass \
    python3 $R/tools/diag/kron_bwd_one.py 1024 $c > $f 2>/dev/null
  echo "== bwd 1024 $c"; python3 $R/tools/diag/ncu_sass_mix.py $f 18; python3 $R/tools/diag/ncu_stalls.py $f 12 | cut -c1-150
done
f=$OUT/src_fwd_16x16x16.csv
timeout $(cap 330) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:kron_small_kernel \
  --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass \
  python3 $R/tools/diag/kron_fwd_one.py 1024 16,16,16 small > $f 2>/dev/null
echo "== fwd 1024 16,16,16"; python3 $R/tools/diag/ncu_sass_mix.py $f 14
gzip -q $OUT/*.csv
echo "total $((SECONDS - T0))s"
