#!/usr/bin/env bash
# Session 33, call 10 (call 9's wheel; its default pool is HEAD's): does the small-factor backward
# at 1024 rows gain from fewer resident blocks with more tiles each (grid caps), as fused phases
# did at 1024 × (16)^3 through their smaller grid? kron_bwd_sel_times.py, selections alternated.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
cd $R/tools/diag
timeout $(cap 100) python3 kron_bwd_sel_times.py "small;small:grid=264;small:grid=330" 3 "1024 16,16,16" "2048 16,16,16"
timeout $(cap 160) python3 kron_bwd_sel_times.py "small;small:grid=132;small:grid=198" 3 "1024 8,8,8,8" "1024 16,8,8"
timeout $(cap 200) python3 kron_bwd_sel_times.py "small;small:grid=264" 3 "256 16,16,16,16" "4096 16,16,16"
echo "total $((SECONDS - T0))s"
