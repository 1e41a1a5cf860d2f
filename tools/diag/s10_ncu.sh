#!/usr/bin/env bash
# Session 10: ncu of the small-factor forward after its vector paths (where the rest of its time goes).
source "$(dirname "$0")/lib.sh"
diag_begin
for c in "1024 8,8,8,8 small" "1024 16,16,16 small"; do
  diag_ncu_kron_fwd 300 $c kron_small
done
echo "total $((SECONDS - T0))s after build"
