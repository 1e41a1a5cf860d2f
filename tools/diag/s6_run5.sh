#!/usr/bin/env bash
# Session 6, call 5: build; forward softmax row-tile variants at (32,12,512,512) (issue 4 margin:
# fp16 sat at 85.0-85.1% of the copy bandwidth) with the softmax CUDA tests under each; the kron
# bench again (device-time backward rows: capture with gc off and thread_local errors).
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
for v in default 8x64 16x32 64x8; do
  if [ $v = default ]; then unset SPARSEKERN_SOFTMAX_TILE; else export SPARSEKERN_SOFTMAX_TILE=$v; fi
  timeout 40 python3 $R/tools/diag/softmax_tile.py 2>&1 | tail -2
  timeout 40 python3 $R/tools/diag/softmax_tile.py 2>&1 | tail -2
  timeout 40 python3 -m pytest $R/tests/python/test_inplace.py -q -p no:cacheprovider -m cuda -k "softmax and not backward" 2>&1 | tail -1
done > $OUT/softmax_tile.txt 2>&1
unset SPARSEKERN_SOFTMAX_TILE
timeout 200 python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json > $OUT/kron_bench.txt 2>&1
echo "kron bench exit $?"
python3 - <<'PY'
import json
d = json.load(open("/tmp/sk-out/kron.json" if False else __import__("os").environ["OUT"] + "/kron.json"))
for r in d["rows"]:
    dm = r.get("device_ms_ours")
    print(r["op"][-3:], r["shape"], "eager", round(r["ours"] * 1e3, 1), round(r["anchor_time"] * 1e3, 1),
          "device", round(dm * 1e3, 1) if dm else r.get("device_ms_error", "")[:80],
          round(r["device_ms_anchor"] * 1e3, 1) if dm else "")
PY
cat $OUT/softmax_tile.txt
