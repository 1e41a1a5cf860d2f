#!/usr/bin/env bash
# Session 17, call 7: the issue-3 target bench (with stk side by side) at the final grouped dds of
# this session (per-mask wgmma issue, one 256-row A box per step): session 14's bench script.
exec bash "$(dirname "$0")/s14_bench.sh"
