#!/usr/bin/env bash
# Session 31, call 2: the bsr CUDA tests that call 1's first half did not reach within its cap
# (ids 170-198 of the collected list), and the new test files whole against the CUDA build.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
T=$R/tests/python
python3 -m pytest $T/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
sed -n "170,198p" /tmp/ids.txt > /tmp/rest.txt
echo "bsr ids 170-198: $(wc -l < /tmp/rest.txt)"
diag_pytest bsr_rest 300 $(cat /tmp/rest.txt)
diag_pytest_report bsr_rest
diag_pytest new_files 200 $T/test_tensor_boundary.py $T/test_bindings.py $T/test_numerics.py
diag_pytest_report new_files
echo "total $((SECONDS - T0))s"
