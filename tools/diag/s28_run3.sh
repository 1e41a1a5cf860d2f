#!/usr/bin/env bash
# Session 28, call 3: the captured backward's bias gradient where the capture stream has no ones
# vector (torch.cuda.graph's warm-up / capture streams; tools/diag/bsr_bias_capture.py): the
# library's column-sum pass against torch's sum, side stream on and off; then the bsr CUDA tests of
# the linear layer, its gradients and captures.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 300) python3 $R/tools/diag/bsr_bias_capture.py bf16:3072:768:128:0.1 bf16:768:3072:128:0.1 bf16:4096:4096:128:0.1 bf16:4096:4096:32:0.25 tf32:3072:768:128:0.1 fp16:3072:768:64:0.5 2>&1 | grep -v -i "warn\|run_backward" | tee $OUT/bias_capture.txt
diag_bsr_cuda_tests 560 "linear or bias or backward or capture or concurrent or patcher"
echo "total $((SECONDS - T0))s"
