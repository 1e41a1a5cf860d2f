#!/usr/bin/env bash
# Issue 5, session 5: the register-tile fused fp32 forward (src/kron/kron_fast.h) against the
# generic one. Does NOT build: run it after the build step. Every step is bounded (≤ 120 s in all),
# most valuable first: the kron CUDA tests under the default selection (new; the tests also run
# both kernels and every plan override in-process), per-kernel GPU time of the ten table cases old
# vs new vs v2 plus the register-tile plan overrides (kron_fwd_ab.py), the forward tests under
# SPARSEKERN_KRON_FWD=old, and compute-sanitizer racecheck + memcheck of a few small forwards of the
# new kernel in every plan variant (kron_race.py: in-place write-backs, cp.async buffer reuse).
# Logs under $OUT (default /tmp/s5-kron).
OUT=${OUT:-/tmp/s5-kron}
mkdir -p "$OUT"
source "$(dirname "$0")/lib.sh"
cd /tmp  # import the installed package, not the source tree
{
echo "=== environment $(date +%T)"
timeout 5 nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
echo "=== kron CUDA tests, default selection $(date +%T)"
timeout 30 python3 -X faulthandler -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda 2>&1 | tail -6
echo "=== forward kernel times: old / new / v2, then plan overrides $(date +%T)"
timeout 40 python3 $R/tools/diag/kron_fwd_ab.py 2>&1; echo "exit $?"
echo "=== kron CUDA forward tests, SPARSEKERN_KRON_FWD=old $(date +%T)"
SPARSEKERN_KRON_FWD=old timeout 18 python3 -X faulthandler -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k forward 2>&1 | tail -3
echo "=== compute-sanitizer racecheck / memcheck of the register-tile kernel (kron_race.py) $(date +%T)"
for tool in racecheck memcheck; do
  timeout 12 compute-sanitizer --tool $tool --print-limit 5 python3 $R/tools/diag/kron_race.py > $OUT/$tool.log 2>&1
  echo "$tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|kron_race|BAD|Invalid|Race reported" $OUT/$tool.log | head -6
done
echo "=== end $(date +%T)"
} 2>&1 | tee $OUT/s5_kron.log
