#!/usr/bin/env bash
# Session 5, final call B (right after A, on the same machine: no build unless BUILD=1): the in-place
# bench (JSON) with the lean 16-bit norm kernel, then the kron bench (JSON) and kron A/B if present.
source "$(dirname "$0")/lib.sh"
[ -z "$BUILD" ] || diag_build /tmp/build_step.log
python3 -c "import sparsekern" 2>/dev/null || diag_build /tmp/build_step.log
rm -f $OUT/*
cd /tmp
timeout 120 python3 -m sparsekern.cli bench --full --family inplace --json $OUT/inplace.json > $OUT/inplace_bench.txt 2>&1
echo "inplace bench exit $?"
if [ -f $R/tools/diag/s5_kron.sh ]; then OUT=$OUT timeout 150 bash $R/tools/diag/s5_kron.sh > $OUT/kron_ab.txt 2>&1; echo "kron a/b exit $?"; fi
timeout 120 python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json > $OUT/kron_bench.txt 2>&1
echo "kron bench exit $?"
grep -E "norm|softmax|square|bert" $OUT/inplace_bench.txt | cut -c1-150 | head -40
tail -30 $OUT/kron_ab.txt 2>/dev/null
grep -E "geomean|roof|fwd" $OUT/kron_bench.txt | head -30
