#!/usr/bin/env bash
# Session 33, call 5: the small-factor kernels with linear tile-copy destinations (kron_small.h:
# small_issue_rows, forward and backward) and the contraction passes walking their fibers in
# Gray-code order (kron_small_bwd.h: small_dF_pass) — new wheel, .whl312 — against c0b8490's
# (.whl312_old), alternated old/new/old/new (kron_bwd_times.py: forward and backward); then with
# the new wheel the kron small-factor and natural-split CUDA tests, memcheck and racecheck over
# kron_small_bwd_check.py and kron_small_check.py (the forward), and ncu's instruction mix of the
# 1024 × (8)^4 backward.
source "$(dirname "$0")/lib.sh"
diag_kron_bwd_ab 300 "${KRON_BWD_CASES[@]}" "1024 32,32"
diag_kron_small_natural_tests 380
for tool in memcheck racecheck; do
  for s in kron_small_bwd_check kron_small_check; do
    timeout $(cap 500) compute-sanitizer --tool $tool python3 $R/tools/diag/$s.py > $OUT/san_${tool}_$s.txt 2>&1
    echo "$tool $s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|cases ok|WRONG' $OUT/san_${tool}_$s.txt | tr '\n' ' ' | cut -c1-200)"
  done
done
f=$OUT/src_bwd_8x8x8x8.csv
timeout $(cap 570) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:kron_small_bwd \
  --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass \
  python3 $R/tools/diag/kron_bwd_one.py 1024 8,8,8,8 > $f 2>/dev/null
python3 $R/tools/diag/ncu_sass_mix.py $f 12; gzip -q $f
echo "total $((SECONDS - T0))s"
