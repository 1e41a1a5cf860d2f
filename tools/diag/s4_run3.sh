#!/usr/bin/env bash
# Session 4, third device run: the new default shape of the 16-bit norm kernels against the old one
# and the shared-memory-plane variants (build with -DSPARSEKERN_NORM_VARIANTS; the default applies
# when SPARSEKERN_INPLACE_NORM_VARIANT is unset), torch's in-place elementwise ceiling at the
# target shape, and kron host time per call piece by piece (tools/diag/kron_host.py).
source "$(dirname "$0")/lib.sh"
CUDA_FLAGS=-DSPARSEKERN_NORM_VARIANTS diag_build $OUT/build_step.log
cd /tmp
summ() {  # compact: variant op shape dtype median% burst%
  python3 - "$@" <<'PY'
import json, sys
for path in sys.argv[1:]:
    d = json.load(open(path))
    tag = path.rsplit("inplace2-", 1)[1][:-5]
    for r in d["rows"]:
        print(f"{tag:8s} {r['op']:10s} {r['shape']:14s} {r['dtype']:8s} {100*r['frac_of_copy']:5.1f} {100*r['burst_frac_of_copy']:5.1f}")
PY
}
{
echo "=== norm tests, default variant $(date +%T)"
timeout 90 python3 -m pytest $R/tests/python/test_inplace.py -q -p no:cacheprovider -m cuda 2>&1 | tail -2
for v in 4x5 8x5; do
  echo "=== norm tests, variant $v $(date +%T)"
  SPARSEKERN_INPLACE_NORM_VARIANT=$v timeout 60 python3 -m pytest $R/tests/python/test_inplace.py -q -p no:cacheprovider -m cuda -k "norm or warp_row" 2>&1 | tail -1
done
for v in default 4x0 4x5 8x5 8x3; do
  e=$v; [ $v = default ] && e=
  SPARSEKERN_INPLACE_NORM_VARIANT=$e INPLACE2_OPS=norm INPLACE2_NORM_SHAPES=16384x4096,16384x2048,16384x3072,65536x1024 INPLACE2_TAG=$v timeout 60 python3 $R/tools/diag/inplace2.py > $OUT/inplace2-$v.log 2>&1
done
echo "=== timings: variant op shape dtype median% burst% (of copy)"
summ $OUT/inplace2-default.json $OUT/inplace2-4x0.json $OUT/inplace2-4x5.json $OUT/inplace2-8x5.json $OUT/inplace2-8x3.json | sort -k2,2 -k3,3 -k4,4 -s
echo "=== torch ceilings $(date +%T)"
INPLACE2_OPS=norm INPLACE2_CEIL=1 INPLACE2_NORM_SHAPES=16384x4096 INPLACE2_TAG=ceil timeout 60 python3 $R/tools/diag/inplace2.py 2>&1 | grep -E "copy ceiling|torch"
echo "=== kron host time $(date +%T)"
timeout 120 python3 $R/tools/diag/kron_host.py cuda --profile 2>&1 | head -90
echo "=== end $(date +%T)"
} > $OUT/run3.log 2>&1
cat $OUT/run3.log
