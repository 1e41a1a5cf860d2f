#!/usr/bin/env bash
# Session 34, call 3 (wheel of 1214261): the small-factor forward at 1024 × (16)^3 and (8)^4 under ncu:
# speed-of-light / occupancy / scheduler / memory sections, then SourceCounters summed per stall
# reason and per SASS opcode (tools/diag/ncu_sass_mix.py) and its top stalled lines (ncu_stalls.py).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
for c in "16,16,16" "8,8,8,8"; do
  diag_ncu_kron_fwd 150 1024 $c auto kron_small_kernel
  f=$OUT/src_fwd_${c//,/x}.csv
  timeout $(cap 280) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:kron_small_kernel \
    --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass \
    python3 $R/tools/diag/kron_fwd_one.py 1024 $c > $f 2>/dev/null
  echo "== mix fwd 1024 $c"; python3 $R/tools/diag/ncu_sass_mix.py $f 20
done
gzip -q $OUT/*.csv
echo "total $((SECONDS - T0))s"
