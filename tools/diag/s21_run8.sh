#!/usr/bin/env bash
# Session 21, call 8 (wheel after the review: sdd_cuda's sm_90a branch through sdd_16bit_sm90, one
# partial-bytes helper, std::clamp of the split count, the Python sdd's 16-bit branch falling
# through to the common call, one copy_tbps for the benches): the 16-bit and tf32 sdd tests, the
# split-K tests and switches, the capture tests and the sm_90a dds tests; bsr_split_ab.py once;
# the bsr quick bench (its memory floor through the shared copy_tbps) and the kron ceilings
# (bench.kron._ceilings, which the full grid calls, now through copy_tbps).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_bsr_cuda_tests 330 "split or graph_capture or test_sdd or linear_tf32 or linear_matches"
SPARSEKERN_BSR_SDD_SPLIT=0 timeout $(cap 380) python3 $R/tools/diag/bsr_split_ab.py 3072:768:128:0.1 768:3072:128:0.1 2>&1 | grep -v Warn
timeout $(cap 430) python3 $R/tools/diag/bsr_split_ab.py 3072:768:128:0.1 768:3072:128:0.1 2>&1 | grep -v Warn
timeout $(cap 480) python3 -m sparsekern.cli bench --family bsr --json $OUT/bsr_quick.json > $OUT/bsr_quick.txt 2>&1
echo "bsr quick bench exit $?"; python3 -m sparsekern.bench.bsr $OUT/bsr_quick.json
timeout $(cap 520) python3 -c "import torch; from sparsekern.bench.kron import _ceilings; print('kron ceilings', _ceilings(torch.device('cuda')))"
echo "total $((SECONDS - T0))s"
