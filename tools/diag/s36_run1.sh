#!/usr/bin/env bash
# Session 36, call 1: (a) the compiled functional_call fix (BlockSparseLinear._traced_index and the
# sparsekern::bsr_index_sets_for_call op) on the GPU: test_module_edges.py whole (its new CUDA
# cases: fullgraph / not, and mode="reduce-overhead" with patterns alternating) and the bsr compile
# / capture / functional tests; (b) where the 1024 × (64 ⊗ 64) register-tile forward (55.7% of the
# roofline, target 60) spends instructions outside its k loops: ncu source counters (csv back).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 240) python3 -m pytest $R/tests/python/test_module_edges.py -q -p no:cacheprovider > $OUT/module_edges.txt 2>&1
tail -3 $OUT/module_edges.txt; grep -E "^(FAILED|ERROR)" $OUT/module_edges.txt | head
timeout $(cap 240) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda \
  -k "compile or functional or capture or traces or load_state or pattern" > $OUT/bsr_subset.txt 2>&1
tail -2 $OUT/bsr_subset.txt; grep -E "^(FAILED|ERROR)" $OUT/bsr_subset.txt | head
for c in "1024 64,64" "4096 64,64"; do
  timeout $(cap 60) python3 $R/tools/diag/kron_fwd_one.py $c auto --time
done
diag_ncu_kron_fwd 200 1024 64,64 auto "kron_fast"
ls -la $OUT | head -20
echo "total $((SECONDS - T0))s"
