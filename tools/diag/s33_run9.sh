#!/usr/bin/env bash
# Session 33, call 9: the small-factor backward with fused phases ("small:fuse=1": mode t's
# contraction and pull-back in one phase, the pulled-back gradient ping-ponging between two tiles)
# against the default pool, both from this wheel, alternated in one process per round
# (kron_bwd_sel_times.py); the kron small-factor and natural-split CUDA tests (fuse=1 among them),
# memcheck and racecheck over kron_small_bwd_check.py with fuse=1.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
(cd $R/tools/diag && timeout $(cap 200) python3 kron_bwd_sel_times.py "small;small:fuse=1" 3 "${KRON_BWD_CASES[@]}")
diag_kron_small_natural_tests 260
for tool in memcheck racecheck; do
  KRON_BWD_CHECK_SEL=fuse=1 timeout $(cap 330) compute-sanitizer --tool $tool python3 $R/tools/diag/kron_small_bwd_check.py > $OUT/san_$tool.txt 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|cases ok' $OUT/san_$tool.txt | tr '\n' ' ' | cut -c1-200)"
done
echo "total $((SECONDS - T0))s"
