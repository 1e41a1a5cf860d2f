#!/usr/bin/env bash
# Session 4, verification after the last Python-only refactors (semi's padded masked weight, the
# kron test helper): build, every CUDA test, and a compute-sanitizer memcheck pass over the csr
# CUDA tests (issue 6 asks for one over the family).
source "$(dirname "$0")/lib.sh"
diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
timeout 200 python3 -X faulthandler -m pytest $R/tests/python -q -p no:cacheprovider -m cuda 2>&1 | tail -2
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest $R/tests/python/test_csr.py -q -p no:cacheprovider -m cuda > /tmp/memcheck.log 2>&1
echo "sanitizer exit $?"; grep -E "ERROR SUMMARY|passed|failed" /tmp/memcheck.log | tail -3
