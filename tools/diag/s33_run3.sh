#!/usr/bin/env bash
# Session 33, call 3: the small-factor backward's block reduction with padded scratch rows (new
# wheel, .whl312) against the kernel before it (.whl312_old: call 1's wheel, whose default path
# is HEAD~2's), alternated old/new/old/new on one machine (kron_bwd_times.py); then with the new
# wheel the kron small-factor CUDA tests and ncu's shared-load bank conflicts at 1024 × (8)^4, and
# its executed instructions per SASS opcode.
source "$(dirname "$0")/lib.sh"
CASES=("1024 8,8,8,8" "1024 16,16,16" "4096 8,8,8,8" "4096 16,16,16" "1024 4,4,4,4,4" "1024 16,8,8"
       "256 16,16,16,16" "64 8,8,8,8,8")
times() { (cd $R/tools/diag && timeout $(cap 300) python3 kron_bwd_times.py "${CASES[@]}"); }
diag_ab_wheels times
timeout $(cap 420) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "small or natural" \
  > $OUT/kron_small_tests.txt 2>&1
echo "kron small/natural cuda tests: $(tail -1 $OUT/kron_small_tests.txt)"
grep -E "^FAILED" $OUT/kron_small_tests.txt | head -5
timeout $(cap 540) ncu --section MemoryWorkloadAnalysis_Tables --section SpeedOfLight --section InstructionStats \
  --kernel-name regex:kron_small_bwd --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_bwd_one.py 1024 8,8,8,8 \
  > $OUT/ncu_bwd_8x4.txt 2>&1
grep -E "Duration|bank|Bank|Executed Instructions " $OUT/ncu_bwd_8x4.txt | sed 's/  */ /g' | head -8
timeout $(cap 580) ncu --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum --print-metric-instances values \
  --kernel-name regex:kron_small_bwd --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_bwd_one.py 1024 8,8,8,8 \
  > $OUT/ncu_bwd_8x4_opcodes.txt 2>&1
grep -E "sass__inst_executed_per_opcode|smsp__inst_executed.sum" -A2 $OUT/ncu_bwd_8x4_opcodes.txt | cut -c1-1500 | head -12
echo "total $((SECONDS - T0))s"
