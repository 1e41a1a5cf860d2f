#!/usr/bin/env bash
# Session 17, call 8: the grouped edge tests with the every-block-mask pattern added (each mask's
# compile-time wgmma case), through every forced kernel/schedule (each_kernel), and under memcheck
# with the grouped kernel forced.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 240 "grouped_edges"
diag_bsr_grouped_sanitize 330 memcheck "grouped_edges and not each_kernel"
echo "total $((SECONDS - T0))s after install"
