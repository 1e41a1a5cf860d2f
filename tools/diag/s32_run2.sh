#!/usr/bin/env bash
# Session 32, call 2: the grouped dds with the producer claiming the next tile and loading its
# index lists during the current one (gdds_trace_pf, built from that uncommitted change) against
# HEAD's kernel (gdds_trace_head), both built by tools/diag/gdds_trace_build.sh; kernel µs of each,
# alternating, at the BERT-base input-gradient shape and at the bench's 4096-wide cells (not kept:
# docs/PERF_NOTES.md, session 32).
cd "$(dirname "$0")/../.."
B=.diagbin
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
for args in "8192 768 3072 128 0.1 0" "8192 768 3072 128 0.5 0" "8192 768 3072 64 0.1 0" "8192 3072 768 128 0.1 0" \
            "8192 4096 4096 128 0.1 2" "8192 4096 4096 128 0.25 2" "8192 4096 4096 64 0.1 2" "8192 4096 4096 64 0.25 2" \
            "8192 4096 4096 32 0.5 2"; do
  for round in 1 2; do
    for w in head pf; do
      echo "== $w $args (round $round)"
      timeout 60 $B/gdds_trace_$w $args 20 | grep -E "kernel us|per tile|producer's|tile period|CTA starts" | \
        { [ $round = 1 ] && cat || grep "kernel us"; }
    done
  done
done
