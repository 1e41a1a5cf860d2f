# Final device run B (right after A, machine still warm: the package A installed is reused):
# the 2:4 diagnostics and benchmark rows of tools/diag/semi3.sh.
cd "$(dirname "$0")/../.."
python3 -c "import sparsekern, sys; print('sparsekern from', sparsekern.__file__)" || STAGES="build" bash tools/device_check.sh > $OUT/build_b.log 2>&1
timeout 280 bash tools/diag/semi3.sh > /dev/null 2>&1
tail -80 $OUT/semi3.log
