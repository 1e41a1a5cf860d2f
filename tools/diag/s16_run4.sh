#!/usr/bin/env bash
# Session 16, calls 4, 6-8, 10: the committed grouped dds (gdds_trace_base) against candidates (BINS,
# .diagbin/ builds of tools/diag/gdds_trace.cu), interleaved three times per shape (SHAPES, ';'-separated
# gdds_trace arguments), with the SM clock and power sampled alongside.
cd "$(dirname "$0")/../.." || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv -lms 50 > $OUT/smi.csv 2>&1 &
SMI=$!
IFS=';' read -ra SH <<< "${SHAPES:-8192 4096 4096 128 0.1 2;8192 4096 4096 128 0.25 2;8192 4096 4096 128 0.5 2;8192 4096 4096 64 0.1 2;8192 4096 4096 64 0.25 2;8192 4096 4096 64 0.5 2}"
for args in "${SH[@]}"; do
  for round in 1 2 3; do
    for bin in ${BINS:-gdds_trace_base gdds_trace_s4}; do
      echo "== $bin round $round"
      timeout 60 .diagbin/$bin $args 30 2>&1
    done
  done
done > $OUT/gdds_ab.txt
kill $SMI
python3 - <<'PY'
import os, re
txt = open(os.environ["OUT"] + "/gdds_ab.txt").read()
rows = {}
for b in txt.split("== ")[1:]:
    name = b.split()[0]
    m = re.search(r"b=(\d+) .*d=([\d.]+)", b); k = re.search(r"plain ([\d.]+)", b); c = re.search(r"SM clock ([\d.]+)", b)
    e = re.search(r"max \|err\| ([\d.e-]+)", b)
    rows.setdefault((m.group(1), m.group(2)), {}).setdefault(name, []).append((float(k.group(1)), float(c.group(1)), e.group(1)))
for key, d in rows.items():
    print("b=%s d=%s: " % key + "; ".join("%s %s (GHz %s, err %s)" % (n, "/".join("%.1f" % x[0] for x in v), "/".join("%.2f" % x[1] for x in v), v[0][2]) for n, v in d.items()))
PY
