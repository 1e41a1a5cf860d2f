#!/usr/bin/env bash
# Session 33, call 3: the small-factor backward's block reduction with padded scratch rows (new
# wheel, .whl312) against the kernel before it (.whl312_old: call 1's wheel, whose default path
# is HEAD~2's), alternated old/new/old/new on one machine (kron_bwd_times.py); then with the new
# wheel the kron small-factor CUDA tests and ncu's shared-load bank conflicts at 1024 × (8)^4, and
# its executed instructions per SASS opcode.
source "$(dirname "$0")/lib.sh"
diag_kron_bwd_ab 300 "${KRON_BWD_CASES[@]}"
diag_kron_small_natural_tests 420
timeout $(cap 540) ncu --section MemoryWorkloadAnalysis_Tables --section SpeedOfLight --section InstructionStats \
  --kernel-name regex:kron_small_bwd --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_bwd_one.py 1024 8,8,8,8 \
  > $OUT/ncu_bwd_8x4.txt 2>&1
grep -E "Duration|bank|Bank|Executed Instructions " $OUT/ncu_bwd_8x4.txt | sed 's/  */ /g' | head -8
timeout $(cap 580) ncu --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum --print-metric-instances values \
  --kernel-name regex:kron_small_bwd --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_bwd_one.py 1024 8,8,8,8 \
  > $OUT/ncu_bwd_8x4_opcodes.txt 2>&1
grep -E "sass__inst_executed_per_opcode|smsp__inst_executed.sum" -A2 $OUT/ncu_bwd_8x4_opcodes.txt | cut -c1-1500 | head -12
echo "total $((SECONDS - T0))s"
