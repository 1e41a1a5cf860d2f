#!/usr/bin/env bash
# Session 4, final device run: build; every CUDA test; one compute-sanitizer memcheck pass over the
# semi CUDA tests (issue 6 asks for one; names of failing tests printed) and the kron default
# backward; the main job on the GPU (sparsekern check); the semi bench JSON (kept under $OUT with
# few other files, so that it comes back).
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/sass.txt $OUT/build.log
cd /tmp
{
echo "=== pytest -m cuda (all families) $(date +%T)"
timeout 240 python3 -X faulthandler -m pytest $R/tests/python -q -p no:cacheprovider -m cuda 2>&1 | tail -3
echo "=== memcheck: every semi CUDA test, kron default backward choice $(date +%T)"
timeout 200 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_semi.py $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda \
   -k "semi or default_choice" -rf > /tmp/memcheck.log 2>&1
echo "sanitizer exit $?"; grep -E "ERROR SUMMARY|passed|failed|FAILED|leaked" /tmp/memcheck.log | head -12
echo "=== sparsekern check (GPU) $(date +%T)"
timeout 200 python3 -m sparsekern.cli check > /tmp/check.log 2>&1; echo "check exit $?"; tail -3 /tmp/check.log
echo "=== bench semi $(date +%T)"
timeout 120 python3 -m sparsekern.cli bench --full --family semi --json $OUT/semi.json 2>&1 | grep -E "^semi" | cut -c1-150
echo "=== end $(date +%T)"
} > $OUT/final.log 2>&1
cat $OUT/final.log
