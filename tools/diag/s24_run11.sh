#!/usr/bin/env bash
# Session 24, call 11 (wheel of b72e873, the final kron code of the session): the issue-5 bench and
# its summary once more, for the record of the final state.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_kron_bench 300
python3 -m sparsekern.bench.kron $OUT/kron.json > $OUT/kron_summary.txt 2>&1; cat $OUT/kron_summary.txt | grep -v FastKron
echo "total $((SECONDS - T0))s after install"
