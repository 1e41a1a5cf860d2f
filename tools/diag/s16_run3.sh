#!/usr/bin/env bash
# Session 16, call 3: the grouped dds's epilogue variants against the committed kernel, with bias,
# traced (tools/diag/gdds_trace.cu builds in .diagbin/: gdds_trace_base = 1254396, the others as
# named on their lines).
cd "$(dirname "$0")/../.." || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
for args in "8192 4096 4096 128 0.1 2" "8192 4096 4096 128 0.25 2" "8192 4096 4096 128 0.5 2" \
            "8192 4096 4096 64 0.1 2" "8192 4096 4096 64 0.25 2"; do
  for bin in ${BINS:-gdds_trace_base gdds_trace_s1}; do
    echo "== $bin"
    timeout 60 .diagbin/$bin $args 30 2>&1
  done
  echo
done | tee $OUT/gdds_variants.txt
