#!/usr/bin/env bash
# Session 10, first call: why the small-factor fused forwards ((1024,[8]^4), (1024,[16]^3)) run at
# ~30 µs against a ~8 µs roofline: device times of the generic (old) and register-tile (new) kernels
# next to a copy of the same bytes, then ncu with stall-sampled SASS of each.
source "$(dirname "$0")/lib.sh"
diag_begin
diag_kron_fwd_times 420 "1024 8,8,8,8 old" "1024 8,8,8,8 new" "1024 16,16,16 old" "1024 16,16,16 new" "1024 32,32 auto" "4096 64,64 auto"
for c in "1024 8,8,8,8 old" "1024 8,8,8,8 new" "1024 16,16,16 new"; do
  diag_ncu_kron_fwd 540 $c kron_
done
echo "total $((SECONDS - T0))s after build"
