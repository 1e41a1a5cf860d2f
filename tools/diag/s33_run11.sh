#!/usr/bin/env bash
# Session 33, call 11 (call 9's wheel; its default pool is HEAD's): the small-factor backward with two
# blocks per SM (grid=264) against its default three, over row counts where each of the three
# blocks would have at most three tiles (16⊗16⊗16: one row per tile), and at (8,16,16), (16,16,8).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R/tools/diag
timeout $(cap 200) python3 kron_bwd_sel_times.py "small;small:grid=264" 3 "256 16,16,16" "512 16,16,16" "768 16,16,16" \
  "1024 16,16,16" "1188 16,16,16" "1024 8,16,16" "1024 16,16,8"
echo "total $((SECONDS - T0))s"
