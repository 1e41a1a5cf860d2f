#!/usr/bin/env bash
# Session 16, call 2: the grouped dds's epilogue split into its steps (gdds_trace with the epilogue
# fields), and the library's gdds SASS before/after the trace hooks (objects built on the CPU
# machine, carried in .diagbin/).
cd "$(dirname "$0")/../.." || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
for f in gdds_bf16_128_bt gdds_f16_64_bn gdds_tf32_64_bt; do
  for v in old new; do
    /usr/local/cuda/bin/cuobjdump -sass .diagbin/${v}_$f.o | grep -E "^\s+/\*[0-9a-f]{4}\*/" | sed 's@/\*[0-9a-f]*\*/@@g' > /tmp/${v}_$f.sass
  done
  echo "SASS $f: old $(wc -l < /tmp/old_$f.sass) lines, new $(wc -l < /tmp/new_$f.sass), differing lines $(diff /tmp/old_$f.sass /tmp/new_$f.sass | grep -c '^[<>]')"
done | tee $OUT/sass_cmp.txt
for args in "8192 4096 4096 128 0.1 2" "8192 4096 4096 128 0.25 2" "8192 4096 4096 64 0.25 2"; do
  timeout 60 .diagbin/gdds_trace $args 30 2>&1 | tee -a $OUT/gdds_trace.txt
  echo | tee -a $OUT/gdds_trace.txt
done
