#!/usr/bin/env bash
# Session 18, call 14 (wheel of ac7d68f): where the small-factor forward of 1024 x (16 x 16 x 16)
# waits (59.7-60.2% of the roofline this session, target 60): ncu sections and stall-sampled SASS.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_ncu_kron_fwd 200 1024 16,16,16 auto "kron_small"
echo "total $((SECONDS - T0))s after install"
