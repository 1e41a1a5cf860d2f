#!/usr/bin/env bash
# Session 31, call 6: the host-path trim of 8ede7b9 (Python only) over the final wheel: kron, the
# second half of bsr, and the other files' CUDA tests (the device budget left no room for bsr's
# first half).
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
diag_copy_package
T=$R/tests/python
python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
n=$(wc -l < /tmp/ids.txt); h=$(( (n + 1) / 2 )); sed -n "$((h + 1)),${n}p" /tmp/ids.txt > /tmp/h2.txt
timeout $(cap 270) python3 -m pytest -q -p no:cacheprovider $(cat /tmp/h2.txt) > $OUT/bsr_half2.txt 2>&1 &
timeout $(cap 270) python3 -m pytest $T/test_kron.py -q -p no:cacheprovider -m cuda > $OUT/kron_tests.txt 2>&1 &
timeout $(cap 270) python3 -m pytest $T/test_dense.py $T/test_csr.py $T/test_inplace.py $T/test_capture.py $T/test_bindings.py -q -p no:cacheprovider -m cuda > $OUT/other_tests.txt 2>&1 &
wait
for f in bsr_half2 kron_tests other_tests; do echo "$f: $(tail -1 $OUT/$f.txt)"; grep -E "^FAILED|^ERROR" $OUT/$f.txt | head -5; done
echo "total $((SECONDS - T0))s"
