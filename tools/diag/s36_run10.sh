#!/usr/bin/env bash
# Session 36, call 10: test_module_edges.py on the GPU after its two new compiled functional_call
# tests share their float64 check (_check_call_against_float64); same wheel as call 9.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_pytest module_edges 200 $R/tests/python/test_module_edges.py -rs
diag_pytest_report module_edges
echo "total $((SECONDS - T0))s"
