#!/usr/bin/env bash
# Session 30, call 7 (call 8 reran the script with its dds input padded to the right width: call 7 passed 91): compiled autograd (fullgraph) over eager forwards on the GPU (the Functions'
# backward take the custom ops while traced, be42035), and test_api_edges against the CUDA build.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_copy_package
timeout $(cap 200) python3 $R/tools/diag/s30_compiled_autograd.py 2>&1 | grep -E "ok|WRONG|Error" | head -6
diag_pytest api_edges 300 $R/tests/python/test_api_edges.py
diag_pytest_report api_edges
echo "total $((SECONDS - T0))s"
