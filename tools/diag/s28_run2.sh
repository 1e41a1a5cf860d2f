#!/usr/bin/env bash
# Session 28, call 2: the bias-gradient fixes (bsr.py: the captured side stream reads its user
# stream's ones vector, a capture without one takes the library's column-sum pass, replaced ones
# vectors stay alive) and the split workspace-query tests on a GPU; then the captured backward with
# the weight gradient on a side stream at several K splits of the weight gradient's sdd
# (tools/diag/bsr_fork_split.py), and the timeline of the BERT-base 3072 → 768 backward at 2 splits.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 200 "workspace_sizes or workspace_query or column_sums or concurrent_grads or cuda_graph_capture or bias"
L="bf16:3072:768:128:0.1 bf16:768:3072:128:0.1 bf16:4096:4096:128:0.1 bf16:3072:768:128:0.5 tf32:3072:768:128:0.1"
for sp in auto 0 2 3 4; do
  SPARSEKERN_BSR_SDD_SPLIT=$sp timeout $(cap 420) python3 $R/tools/diag/bsr_fork_split.py $L 2>&1 | grep -v Warn
done | tee $OUT/fork_split.txt
SPARSEKERN_BSR_SDD_SPLIT=2 timeout $(cap 500) python3 $R/tools/diag/bsr_bwd_parts.py bf16:3072:768:128:0.1 2>&1 | grep -v -i "warn\|run_backward" | tee $OUT/bwd_parts_split2.txt
echo "total $((SECONDS - T0))s"
