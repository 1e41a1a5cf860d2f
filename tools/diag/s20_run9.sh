#!/usr/bin/env bash
# Session 20, call 9 (wheel of 4f73d1e; the review's arch.cuh change gives the same PTX): the bsr
# tests that run each switch in a fresh process, after their malformed-value checks moved into one
# helper (tests/python/test_bsr.py: _sdd_rejects_switch), and the emulation-covered tf32 sdd tests.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 300 "sdd_group_each or sdd_wgmma_each or (test_sdd and tf32 and not each)"
echo "total $((SECONDS - T0))s"
