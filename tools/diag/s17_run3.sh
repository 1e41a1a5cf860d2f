#!/usr/bin/env bash
# Session 17, call 3: the wheel with the grouped dds's per-mask wgmma issue (gdds_issue_blocks): the
# bsr dds CUDA tests, then memcheck and synccheck over the grouped edge and panel tests with the
# grouped kernel forced (blocks of 32 and 64 take the changed path).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 220 "dds or grouped or panels"
for tool in memcheck synccheck; do
  diag_bsr_grouped_sanitize 330 $tool "panels_and_bias or (grouped_edges and not each_kernel)"
done
echo "total $((SECONDS - T0))s after install"
