#!/usr/bin/env bash
# Session 6: kron forward/backward under CUDA graph capture (tools/diag/kron_capture.py).
source "$(dirname "$0")/lib.sh"
python3 -c "import sparsekern" 2>/dev/null || diag_build /tmp/build_step.log
cd /tmp
timeout 120 python3 $R/tools/diag/kron_capture.py 2>&1 | tail -40
